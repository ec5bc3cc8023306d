package moirai.flink;

import java.io.File;
import java.net.URISyntaxException;
import java.time.Duration;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamNode;

/**
 * A job submitted to a running standalone session cluster ({@code --jobmanager HOST:PORT}, the
 * JobManager's REST address) as a client submits it: a remote environment that ships this jar with
 * the job, so that the TaskManagers load the job's classes (and {@link moirai.jobs.Registry}'s
 * statics) in a class loader of the job's own. What the tasks count and measure comes back as
 * accumulators ({@link ClusterResults}).
 */
final class StandaloneCluster {
    private StandaloneCluster() {}

    /** The remote environment of the cluster at {@code hostPort}, with the job's configuration. */
    static StreamExecutionEnvironment environment(String hostPort, Configuration conf) throws Run.StartError {
        int colon = hostPort.lastIndexOf(':');
        String host = hostPort.substring(0, colon);
        int port = Integer.parseInt(hostPort.substring(colon + 1));
        // A TaskManager lost under the job: start again on the slots that are left, a few times.
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 5);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(2));
        // Chaining on, so that the probes can chain to their sources and sinks; ClusterResults.chain
        // keeps every other operator in a task thread of its own.
        conf.set(PipelineOptions.OPERATOR_CHAINING, true);
        return StreamExecutionEnvironment.createRemoteEnvironment(host, port, conf, jar());
    }

    /** The jar this class was loaded from: the job's classes, shipped with the job. */
    private static String jar() throws Run.StartError {
        try {
            File f = new File(StandaloneCluster.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            if (!f.isFile()) {
                throw new Run.StartError("--jobmanager ships the job's jar to the cluster, but these classes come from "
                        + f + ", not a jar; build it (mvn -f integrations/flink/pom.xml package) and run from "
                        + "target/moirai-flink-jobs.jar");
            }
            return f.getPath();
        } catch (URISyntaxException e) {
            throw new Run.StartError("cannot tell which jar holds the job's classes: " + e.getMessage());
        }
    }

    /** Subtasks of the job (operator chaining is off: one task thread each). */
    static int subtasks(StreamExecutionEnvironment env) {
        int n = 0;
        for (StreamNode node : env.getStreamGraph(false).getStreamNodes()) {
            n += Math.max(1, node.getParallelism());
        }
        return n;
    }
}
