package moirai.storm;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.storm.Config;
import org.apache.storm.DaemonConfig;
import org.apache.storm.LocalCluster;
import org.apache.storm.daemon.supervisor.StandaloneSupervisor;
import org.apache.storm.daemon.supervisor.Supervisor;
import org.apache.storm.messaging.IContext;
import org.apache.storm.messaging.local.Context;

/**
 * The one supervisor of a run's {@link LocalCluster}, started with its handle to Nimbus already
 * set.
 *
 * <p>{@code LocalCluster.addSupervisor} (Storm 2.8, unchanged on Storm's main branch) calls
 * {@code Supervisor.launch()} first and {@code setLocalNimbus} after it. {@code launch()} starts
 * timers that fire at once — the assignment sync and the worker-heartbeat report, both of which
 * call the local Nimbus — so on a loaded host a timer can run before the handle is set; it then
 * throws a NullPointerException ({@code "nimbus" is null}) and Storm halts the JVM with exit code
 * 20 before the topology runs. This does what {@code addSupervisor} does, in the safe order.
 */
final class LocalSupervisor {
    /** The first slot port of the supervisor, as LocalCluster's default: local mode opens no sockets on them. */
    private static final int FIRST_SLOT_PORT = 1024;

    private LocalSupervisor() {
    }

    /**
     * Starts a supervisor with {@code slots} worker slots in {@code cluster} (built with no
     * supervisors), its local state in a new directory under {@code java.io.tmpdir}.
     */
    static Supervisor start(LocalCluster cluster, int slots) throws Exception {
        Map<String, Object> conf = new HashMap<>(cluster.getDaemonConf());
        conf.put(Config.STORM_LOCAL_DIR, Files.createTempDirectory("supervisor-").toString());
        List<Integer> ports = new ArrayList<>(slots);
        for (int i = 0; i < slots; i++) {
            ports.add(FIRST_SLOT_PORT + i);
        }
        conf.put(DaemonConfig.SUPERVISOR_SLOTS_PORTS, ports);
        // As LocalCluster does without simulated time: notice assignment changes at once.
        conf.put(DaemonConfig.SUPERVISOR_MONITOR_FREQUENCY_SECS, 1);
        // The workers' in-process messaging, as LocalCluster prepares its own (which it keeps private).
        IContext messaging = new Context();
        messaging.prepare(conf);
        Supervisor supervisor = new Supervisor(conf, messaging, new StandaloneSupervisor(), cluster.getMetricRegistry());
        supervisor.setLocalNimbus(cluster.getNimbus());
        supervisor.launch();
        cluster.getNimbus().addSupervisor(supervisor);
        return supervisor;
    }
}
