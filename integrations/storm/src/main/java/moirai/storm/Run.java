package moirai.storm;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.HdrHistogram.Histogram;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.generated.TopologySummary;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.utils.VersionInfo;

import moirai.jobs.LrRecords;
import moirai.jobs.Offered;
import moirai.jobs.Options;
import moirai.jobs.Registry;
import moirai.jobs.Spin;
import moirai.jobs.Summary;
import moirai.jobs.SynDraw;
import moirai.jobs.SynTuple;

/**
 * Runs one of moirai's workloads as a real Apache Storm topology in a {@link LocalCluster} (Nimbus,
 * a supervisor and the workers as threads of this JVM), at an offered rate, for a duration, with
 * Storm's metrics written by its {@code CsvStormReporter} every second, and prints a summary with
 * the field names of {@code moirai run <workload> --json}. See README.md.
 *
 * <p>Exit codes: 0 after a run, 2 for a bad command line, 1 when the topology could not start or
 * failed. Stdout carries only the summary; Storm's logs (log4j2, WARN and above) go to stderr.
 */
public final class Run {
    private Run() {}

    /** How long after {@code --duration} the topology may take to drain before it is killed anyway. */
    private static final long DRAIN_TIMEOUT_NS = 60_000_000_000L;
    /** How long the topology may take to start. */
    private static final long START_TIMEOUT_NS = 180_000_000_000L;

    /** The metrics the CSV reporter writes (a RegexFilter on the metric names). */
    static final String METRICS_FILTER = ".*-(receive-queue-(population|pct_full|arrival_rate_secs|capacity|overflow)"
            + "|__(execute|emit|transfer)-count-[^.]*|__capacity|__skipped-backpressure-ms|pendingRecords)$";

    /** Entry point: {@code Run <workload> [flags]}. */
    public static void main(String[] args) {
        PrintStream stdout = System.out;
        // Nothing but the summary may reach stdout: anything a library prints goes to stderr.
        System.setOut(System.err);
        if (System.getProperty("log4j2.configurationFile") == null
                && System.getProperty("log4j.configurationFile") == null) {
            System.setProperty("log4j2.configurationFile", "classpath:moirai-storm-log4j2.xml");
        }
        Path scratch = scratchDir();
        Options options;
        try {
            options = Options.parse(args, Options.Engine.STORM);
        } catch (Options.UsageError e) {
            System.err.println("moirai-storm: " + e.getMessage());
            System.err.println();
            System.err.print(Options.usage(Options.Engine.STORM));
            System.exit(2);
            return;
        }
        if (options.help) {
            stdout.print(Options.usage(Options.Engine.STORM));
            stdout.flush();
            System.exit(0);
        }
        int code;
        try {
            code = run(options, stdout);
        } catch (StartError e) {
            System.err.println("moirai-storm: " + e.getMessage());
            code = 1;
        } catch (Throwable t) {
            System.err.println("moirai-storm: the Storm topology failed: " + describe(t));
            code = 1;
        }
        stdout.flush();
        System.err.flush();
        deleteTree(scratch);
        // Storm's non-daemon threads must not keep the JVM alive.
        Runtime.getRuntime().halt(code);
    }

    /**
     * A scratch directory of this run, made the JVM's {@code java.io.tmpdir} before Storm starts:
     * the LocalCluster's state (Nimbus' blobs, the supervisor's RocksDB, ~75 MB), RocksDB's native
     * library and the default metrics directory go there, and it is deleted when the run ends —
     * normally or on SIGTERM/SIGINT (a shutdown hook) — so that runs leave nothing in /tmp. Only
     * a SIGKILL leaves it behind (named {@code moirai-storm-*}).
     */
    private static Path scratchDir() {
        try {
            Path dir = Files.createTempDirectory("moirai-storm-");
            System.setProperty("java.io.tmpdir", dir.toString());
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir), "moirai-storm-scratch"));
            return dir;
        } catch (IOException e) {
            System.err.println("moirai-storm: cannot create a scratch directory in " + System.getProperty("java.io.tmpdir")
                    + " (" + e + "); Storm's local state stays in the default temporary directory");
            return null;
        }
    }

    /** Deletes a directory and everything in it, as far as it can (a file Storm still writes may stay). */
    private static void deleteTree(Path dir) {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (java.util.stream.Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | java.io.UncheckedIOException e) {
            System.err.println("moirai-storm: could not delete the scratch directory " + dir + ": " + e);
        }
    }

    /** The topology could not start; the message says why and what to do. */
    static final class StartError extends Exception {
        private static final long serialVersionUID = 1L;

        StartError(String message) {
            super(message);
        }
    }

    /** The innermost cause of a failure, with the outermost. */
    static String describe(Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String s = root.getClass().getName() + ": " + root.getMessage();
        if (root != t) {
            s += " (in " + t.getClass().getSimpleName() + ": " + t.getMessage() + ")";
        }
        return s.replace('\n', ' ');
    }

    /** The metrics directory: the flag's (created if missing) or a fresh temporary one. */
    static Path metricsDir(Options o) throws StartError {
        try {
            if (o.metricsDir == null) {
                // In the run's scratch directory (named explicitly: Files caches the temporary
                // directory it first saw), deleted with it when the run ends.
                return Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "moirai-storm-metrics-");
            }
            Path dir = Path.of(o.metricsDir).toAbsolutePath();
            Files.createDirectories(dir);
            if (!Files.isWritable(dir)) {
                throw new StartError("--metrics-dir " + dir + " is not writable; pick another directory");
            }
            return dir;
        } catch (IOException e) {
            throw new StartError("cannot create the metrics directory " + (o.metricsDir == null ? "" : o.metricsDir)
                    + " (" + e + "); pick another with --metrics-dir DIR");
        }
    }

    /** The topology's configuration. */
    static Config stormConfig(Options o, Path metricsDir) {
        Config conf = new Config();
        conf.setNumWorkers(o.workers);
        // No acking: tuples are emitted unanchored; no acker executors.
        conf.setNumAckers(0);
        conf.setNumEventLoggers(0);
        conf.setDebug(false);
        // Count every tuple in __execute-count & co. (Storm's default samples 5 % and counts 20 each).
        conf.setStatsSampleRate(1.0);
        // Tuples crossing workers (only with --workers > 1) are serialized by Kryo.
        for (Class<?> c : List.of(SynTuple.class, LrRecords.Line.class, LrRecords.PositionReport.class,
                LrRecords.AvgVehicleSpeed.class, LrRecords.Lav.class, LrRecords.CountTuple.class,
                LrRecords.Notification.class, End.class)) {
            conf.registerSerialization(c);
        }
        Map<String, Object> filter = new LinkedHashMap<>();
        filter.put("class", "org.apache.storm.metrics2.filters.RegexFilter");
        filter.put("expression", System.getProperty("moirai.storm.metricsFilter", METRICS_FILTER));
        Map<String, Object> reporter = new LinkedHashMap<>();
        reporter.put("class", "org.apache.storm.metrics2.reporters.CsvStormReporter");
        reporter.put("report.period", o.reportPeriodS);
        reporter.put("report.period.units", "SECONDS");
        reporter.put("csv.log.dir", metricsDir.toString());
        reporter.put("filter", filter);
        conf.put(Config.TOPOLOGY_METRICS_REPORTERS, List.of(reporter));
        if (o.parkMicros != null) {
            // Idle executors park for a fixed time instead of Storm's default progressive wait
            // (spin, 1000 x parkNanos(1), then 1 ms sleeps): in every wait situation, so that no
            // executor polls in a tight loop (README.md, "Wait strategy").
            String park = "org.apache.storm.policy.WaitStrategyPark";
            conf.put(Config.TOPOLOGY_SPOUT_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_BOLT_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC, o.parkMicros);
            conf.put(Config.TOPOLOGY_BOLT_WAIT_PARK_MICROSEC, o.parkMicros);
            conf.put(Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC, o.parkMicros);
        }
        return conf;
    }

    /** The wait strategy as the flag names it: {@code progressive} or {@code park:MICROS}. */
    static String waitStrategy(Options o) {
        return o.parkMicros == null ? "progressive" : "park:" + o.parkMicros;
    }

    static int run(Options o, PrintStream stdout) throws Exception {
        Path metrics = metricsDir(o);
        System.err.println("moirai-storm: metrics (CSV, every " + (o.reportPeriodS == 1 ? "second" : o.reportPeriodS + " s")
                + ") in " + metrics);
        Registry.durationNs = o.durationNs;
        Registry.warmup = o.warmup;
        String name = "moirai-" + o.workload;
        boolean syn = o.workload.equals("syn");
        List<SynDraw.QueryParams> synParams = syn ? SynDraw.draw(o.syn) : List.of();
        boolean spins = synParams.stream().anyMatch(
                q -> q.sinkCostNs > 0 || q.operators.stream().anyMatch(op -> op.costNs > 0));
        double spinRate = spins ? Spin.iterationsPerNs() : 0;

        double durationS = o.durationNs / 1e9;
        Offered offered = o.rate == 0
                ? Offered.unlimited()
                : o.rampTo != null ? Offered.ramp(o.rate, o.rampTo, durationS) : Offered.constant(o.rate);
        TopologyBuilder builder = new TopologyBuilder();
        int sinkTasks;
        if (syn) {
            Syn.build(builder, o.syn, synParams, offered, o.durationNs, o.parallelism);
            sinkTasks = o.syn.queries * o.parallelism;
        } else {
            LinearRoad.build(builder, o.traffic, offered, o.durationNs, o.parallelism);
            sinkTasks = o.parallelism;
        }
        StormTopology topology = builder.createTopology();

        long jvmStartMs = ManagementFactory.getRuntimeMXBean().getStartTime();
        // Not closed: the JVM halts after the summary (closing waits seconds for the worker slots).
        LocalCluster cluster = new LocalCluster.Builder().withSupervisors(0).build();
        LocalSupervisor.start(cluster, Math.max(4, o.workers));
        cluster.submitTopology(name, stormConfig(o, metrics), topology);
        String id = topologyId(cluster, name);
        System.err.printf("moirai-storm: topology %s (%s) submitted, idle executors wait: %s%n", id, name,
                waitStrategy(o));
        Map<String, Object> s = watch(o, cluster, name, id, jvmStartMs, sinkTasks, metrics);
        Summary.workloadFields(s, o, spinRate, synParams);
        Summary.print(s, o.json, stdout, "Apache Storm " + s.get("storm_version"), "executors");
        return 0;
    }

    private static String topologyId(LocalCluster cluster, String name) throws Exception {
        for (TopologySummary t : cluster.getClusterInfo().get_topologies()) {
            if (t.get_name().equals(name)) {
                return t.get_id();
            }
        }
        throw new StartError("the topology " + name + " was submitted but Nimbus does not list it");
    }

    /** Watches the run, ends it, and returns the summary's engine fields. */
    private static Map<String, Object> watch(Options o, LocalCluster cluster, String name, String id, long jvmStartMs,
            int sinkTasks, Path metrics) throws Exception {
        double durationS = o.durationNs / 1e9;
        List<Object> timeline = new ArrayList<>();
        long cpu0 = -1;
        long cpu1 = -1;
        long t0 = 0;
        long t1 = 0;
        int nextSecond = 1;
        long lastIn = 0;
        long lastOut = 0;
        long lastT = 0;
        double startupS = -1;
        int fullSeconds = (int) Math.floor(durationS + 1e-9);
        long submitted = System.nanoTime();
        boolean drained = false;
        while (true) {
            long now = System.nanoTime();
            long start = Registry.startNs();
            if (start == 0) {
                if (now - submitted > START_TIMEOUT_NS) {
                    throw new StartError("the topology did not start within " + START_TIMEOUT_NS / 1_000_000_000L
                            + " s (no spout emitted); see Storm's log above");
                }
                Thread.sleep(20);
                continue;
            }
            if (startupS < 0) {
                long startMs = Registry.startEpochMs;
                startupS = ((startMs == 0 ? System.currentTimeMillis() : startMs) - jvmStartMs) / 1e3;
                System.err.printf("moirai-storm: topology running, spouts started %.1f s after the JVM%n", startupS);
            }
            if (cpu0 < 0 && now - Registry.windowStartNs() >= 0) {
                cpu0 = Summary.processCpuNs();
                t0 = now;
            }
            if (cpu1 < 0 && now - Registry.windowEndNs() >= 0) {
                cpu1 = Summary.processCpuNs();
                t1 = now;
            }
            while (nextSecond <= fullSeconds && now - (start + nextSecond * 1_000_000_000L) >= 0) {
                long in = Registry.emitted();
                long out = Registry.received();
                long t = now - start;
                double dt = Math.max(t - lastT, 1) / 1e9;
                timeline.add(Summary.point(t / 1e9, (in - lastIn) / dt, (out - lastOut) / dt, Registry.backlog()));
                lastIn = in;
                lastOut = out;
                lastT = t;
                nextSecond++;
            }
            if (Sink.DRAINED.get() >= sinkTasks) {
                drained = true;
                break;
            }
            if (now - Registry.windowEndNs() > DRAIN_TIMEOUT_NS) {
                System.err.printf("moirai-storm: the topology did not drain within %d s after --duration; "
                        + "killing it (the summary counts what reached the sinks)%n", DRAIN_TIMEOUT_NS / 1_000_000_000L);
                break;
            }
            long wait = 100_000_000L;
            for (long target : new long[] {
                cpu0 < 0 ? Registry.windowStartNs() : Long.MAX_VALUE,
                cpu1 < 0 ? Registry.windowEndNs() : Long.MAX_VALUE,
                nextSecond <= fullSeconds ? start + nextSecond * 1_000_000_000L : Long.MAX_VALUE}) {
                if (target != Long.MAX_VALUE) {
                    wait = Math.min(wait, Math.max(0, target - now));
                }
            }
            Thread.sleep(Math.max(1, wait / 1_000_000), (int) (wait % 1_000_000));
        }
        long now = System.nanoTime();
        if (cpu0 < 0) {
            cpu0 = Summary.processCpuNs();
            t0 = now;
        }
        if (cpu1 < 0) {
            cpu1 = Summary.processCpuNs();
            t1 = now;
        }
        double runS = (now - Registry.startNs()) / 1e9;
        KillOptions kill = new KillOptions();
        kill.set_wait_secs(0);
        cluster.killTopologyWithOpts(name, kill);

        double measuredS = o.durationNs * (1 - o.warmup) / 1e9;
        Histogram[] latencies = Registry.latencies();
        Map<String, Object> s = moirai.jobs.Json.object();
        s.put("workload", o.workload);
        s.put("system", "storm");
        s.put("storm_version", VersionInfo.getVersion());
        s.put("topology_name", name);
        s.put("topology_id", id);
        s.put("offered_rate", o.rate);
        if (o.rampTo != null) {
            s.put("ramp_to", o.rampTo);
        }
        s.put("duration_s", durationS);
        s.put("measured_s", measuredS);
        s.put("ingress_tps", Registry.emittedMeasured() / measuredS);
        s.put("egress_tps", Registry.receivedMeasured() / measuredS);
        s.put("tuples_in", Registry.emitted());
        s.put("tuples_out", Registry.received());
        s.put("latency_ms", Summary.latency(latencies[0]));
        s.put("e2e_latency_ms", Summary.latency(latencies[1]));
        s.put("threads", Registry.SUBTASKS.get());
        s.put("cpu_cores", Math.max(0, cpu1 - cpu0) / 1e9 / Math.max((t1 - t0) / 1e9, 1e-9));
        s.put("startup_s", startupS);
        s.put("run_s", runS);
        s.put("drained", drained);
        s.put("timeline", timeline);
        s.put("warmup", o.warmup);
        s.put("parallelism", o.parallelism);
        s.put("workers", o.workers);
        s.put("wait_strategy", waitStrategy(o));
        s.put("metrics_dir", metrics.toString());
        s.put("seed", new java.math.BigInteger(Long.toUnsignedString(o.seed)));
        return s;
    }
}
