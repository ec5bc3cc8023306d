package moirai.flink;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Runs one of moirai's workloads as a real Apache Flink job in a local environment (a MiniCluster
 * in this JVM, REST API and web UI on 127.0.0.1), at an offered rate, for a duration, and prints a
 * summary with the field names of {@code moirai run <workload> --json}. See README.md.
 *
 * <p>Exit codes: 0 after a run, 2 for a bad command line, 1 when the job could not start or
 * failed. Stdout carries only the summary; Flink's logs go to stderr.
 */
public final class Run {
    private Run() {}

    /** Entry point: {@code Run <workload> [flags]}. */
    public static void main(String[] args) {
        PrintStream stdout = System.out;
        // Nothing but the summary may reach stdout: anything a library prints goes to stderr.
        System.setOut(System.err);
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.slf4j.simpleLogger.logFile", "System.err");
        setDefault("org.slf4j.simpleLogger.showDateTime", "true");
        setDefault("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        // Harmless warnings of every local run: no log file for the web UI, no delegation tokens.
        setDefault("org.slf4j.simpleLogger.log.org.apache.flink.runtime.webmonitor.WebMonitorUtils", "error");
        setDefault("org.slf4j.simpleLogger.log.org.apache.flink.runtime.security.token", "error");
        Options options;
        try {
            options = Options.parse(args);
        } catch (Options.UsageError e) {
            System.err.println("moirai-flink: " + e.getMessage());
            System.err.println();
            System.err.print(Options.USAGE);
            System.exit(2);
            return;
        }
        if (options.help) {
            stdout.print(Options.USAGE);
            stdout.flush();
            System.exit(0);
        }
        int code;
        try {
            code = run(options, stdout);
        } catch (StartError e) {
            System.err.println("moirai-flink: " + e.getMessage());
            code = 1;
        } catch (Throwable t) {
            System.err.println("moirai-flink: the Flink job failed: " + describe(t));
            code = 1;
        }
        stdout.flush();
        System.err.flush();
        // Flink's non-daemon threads must not keep the JVM alive.
        System.exit(code);
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    /** The job could not start; the message says why and what to do. */
    static final class StartError extends Exception {
        private static final long serialVersionUID = 1L;

        StartError(String message) {
            super(message);
        }
    }

    /** The innermost causes of a failure, most specific last. */
    static String describe(Throwable t) {
        StringBuilder s = new StringBuilder();
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        s.append(root.getClass().getName()).append(": ").append(root.getMessage());
        if (root != t) {
            s.append(" (in ").append(t.getClass().getSimpleName()).append(": ").append(t.getMessage()).append(')');
        }
        String text = s.toString().replace('\n', ' ');
        if (text.contains("InaccessibleObjectException") || text.contains("module java.base does not \"opens")) {
            text += "; Kryo needs reflective access on JDK 17: start the JVM with --add-opens java.base/java.lang=ALL-UNNAMED "
                    + "--add-opens java.base/java.util=ALL-UNNAMED (this is a bug: these jobs should not use Kryo)";
        }
        return text;
    }

    private static void checkPortFree(int port) throws StartError {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
        } catch (IOException e) {
            throw new StartError("the REST port 127.0.0.1:" + port + " is taken (" + e.getMessage()
                    + "), maybe by another Flink job; pick a free one with --rest-port N");
        }
    }

    /** Flink's configuration for the local environment. */
    static Configuration flinkConfiguration(Options o, String jobName) {
        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.PORT, o.restPort);
        // The JobManager fetches metrics for REST at most this often (default 10 s).
        conf.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
        conf.set(PipelineOptions.NAME, jobName);
        conf.set(PipelineOptions.OPERATOR_CHAINING, false);
        // Every tuple type is a POJO: fail rather than fall back to Kryo.
        conf.set(PipelineOptions.GENERIC_TYPES, false);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        // Enough network buffers for a few hundred tasks (64 MiB is the local default).
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse("128m"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse("128m"));
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("32m"));
        return conf;
    }

    static int run(Options o, PrintStream stdout) throws Exception {
        checkPortFree(o.restPort);
        Registry.durationNs = o.durationNs;
        Registry.warmup = o.warmup;
        String jobName = "moirai-" + o.workload;
        boolean syn = o.workload.equals("syn");
        double spinRate = syn && o.syn.costNs > 0 ? Spin.iterationsPerNs() : 0;

        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironmentWithWebUI(flinkConfiguration(o, jobName));
        env.setParallelism(o.parallelism);
        env.disableOperatorChaining();
        env.setBufferTimeout(o.bufferTimeoutMs);
        env.getConfig().disableGenericTypes();

        double durationS = o.durationNs / 1e9;
        Offered offered = o.rate == 0
                ? Offered.unlimited()
                : o.rampTo != null ? Offered.ramp(o.rate, o.rampTo, durationS) : Offered.constant(o.rate);
        if (syn) {
            Syn.build(env, o.syn, offered, o.durationNs, o.parallelism);
        } else {
            LinearRoad.build(env, o.traffic, offered, o.durationNs, o.parallelism);
        }

        long jvmStartMs = ManagementFactory.getRuntimeMXBean().getStartTime();
        JobClient client = env.executeAsync(jobName);
        System.err.printf("moirai-flink: job %s (%s) submitted; REST API and web UI on http://127.0.0.1:%d%n",
                client.getJobID(), jobName, o.restPort);
        CompletableFuture<JobExecutionResult> result = client.getJobExecutionResult();

        // Watch the run: CPU at the edges of the measured window, a timeline point every second.
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
        while (!result.isDone()) {
            long wait = 100_000_000L;
            long start = Registry.startNs();
            if (start != 0) {
                long now = System.nanoTime();
                for (long target : new long[] {
                    cpu0 < 0 ? Registry.windowStartNs() : Long.MAX_VALUE,
                    cpu1 < 0 ? Registry.windowEndNs() : Long.MAX_VALUE,
                    nextSecond <= fullSeconds ? start + nextSecond * 1_000_000_000L : Long.MAX_VALUE}) {
                    if (target != Long.MAX_VALUE) {
                        wait = Math.min(wait, Math.max(0, target - now));
                    }
                }
            }
            try {
                result.get(Math.max(wait, 200_000L), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                // Time for the next look.
            } catch (ExecutionException e) {
                break;
            }
            start = Registry.startNs();
            if (start == 0) {
                continue;
            }
            if (startupS < 0) {
                long startMs = Registry.startEpochMs;
                startupS = ((startMs == 0 ? System.currentTimeMillis() : startMs) - jvmStartMs) / 1e3;
                System.err.printf("moirai-flink: job running, sources started %.1f s after the JVM%n", startupS);
            }
            long now = System.nanoTime();
            if (cpu0 < 0 && now - Registry.windowStartNs() >= 0) {
                cpu0 = processCpuNs();
                t0 = now;
            }
            if (cpu1 < 0 && now - Registry.windowEndNs() >= 0) {
                cpu1 = processCpuNs();
                t1 = now;
            }
            while (nextSecond <= fullSeconds && now - (start + nextSecond * 1_000_000_000L) >= 0) {
                long in = Registry.emitted();
                long out = Registry.received();
                long t = now - start;
                double dt = Math.max(t - lastT, 1) / 1e9;
                Map<String, Object> point = Json.object();
                point.put("t_s", t / 1e9);
                point.put("ingress_tps", (in - lastIn) / dt);
                point.put("egress_tps", (out - lastOut) / dt);
                point.put("backlog", Registry.backlog());
                timeline.add(point);
                lastIn = in;
                lastOut = out;
                lastT = t;
                nextSecond++;
            }
        }
        JobExecutionResult done = result.get();
        long now = System.nanoTime();
        if (cpu0 < 0) {
            cpu0 = processCpuNs();
            t0 = now;
        }
        if (cpu1 < 0) {
            cpu1 = processCpuNs();
            t1 = now;
        }

        double measuredS = o.durationNs * (1 - o.warmup) / 1e9;
        Histogram[] latencies = Registry.latencies();
        Map<String, Object> s = Json.object();
        s.put("workload", o.workload);
        s.put("system", "flink");
        s.put("flink_version", EnvironmentInformation.getVersion());
        s.put("job_name", jobName);
        s.put("job_id", client.getJobID().toString());
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
        s.put("latency_ms", summary(latencies[0]));
        s.put("e2e_latency_ms", summary(latencies[1]));
        s.put("threads", Registry.SUBTASKS.get());
        s.put("cpu_cores", Math.max(0, cpu1 - cpu0) / 1e9 / Math.max((t1 - t0) / 1e9, 1e-9));
        s.put("startup_s", startupS);
        s.put("net_runtime_s", done.getNetRuntime(TimeUnit.MILLISECONDS) / 1e3);
        s.put("timeline", timeline);
        s.put("warmup", o.warmup);
        s.put("parallelism", o.parallelism);
        s.put("rest_port", o.restPort);
        s.put("buffer_timeout_ms", o.bufferTimeoutMs);
        s.put("seed", new java.math.BigInteger(Long.toUnsignedString(o.seed)));
        if (syn) {
            s.put("queries", o.syn.queries);
            s.put("ops", o.syn.ops);
            s.put("cost_ns", o.syn.costNs);
            s.put("selectivity", o.syn.selectivity);
            if (o.syn.heavyOp > 0) {
                s.put("heavy_op", o.syn.heavyOp);
                s.put("heavy_factor", o.syn.heavyFactor);
            }
            // As moirai's SynConfig: the offered rate per query.
            s.put("rate", o.rate / o.syn.queries);
            s.put("spin_iterations_per_ns", spinRate);
        } else {
            s.put("shape", "lachesis");
            s.put("xways", o.traffic.xways);
            s.put("traffic_s", o.traffic.durationS);
            s.put("cars_per_second", o.traffic.carsPerSecond);
            s.put("workload_stats", linearRoadStats());
        }
        print(s, o.json, stdout);
        return 0;
    }

    private static long processCpuNs() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
            return Math.max(0, sun.getProcessCpuTime());
        }
        return 0;
    }

    /** A histogram of ns as moirai's {@code LatencySummary}: ms, zeros when empty. */
    static Map<String, Object> summary(Histogram h) {
        Map<String, Object> m = Json.object();
        long n = h.getTotalCount();
        m.put("count", n);
        m.put("mean", n == 0 ? 0.0 : h.getMean() / 1e6);
        m.put("p50", n == 0 ? 0.0 : h.getValueAtPercentile(50.0) / 1e6);
        m.put("p99", n == 0 ? 0.0 : h.getValueAtPercentile(99.0) / 1e6);
        m.put("p999", n == 0 ? 0.0 : h.getValueAtPercentile(99.9) / 1e6);
        m.put("max", n == 0 ? 0.0 : h.getMaxValue() / 1e6);
        return m;
    }

    /** What the Linear Road job counted, as moirai's {@code LinearRoadReport}. */
    private static Map<String, Object> linearRoadStats() {
        Map<String, Object> m = Json.object();
        long[] branches = new long[3];
        long outputs = 0;
        for (int b = 0; b < 3; b++) {
            branches[b] = Registry.LACHESIS_NOTIFICATIONS[b].sum();
            outputs += branches[b];
        }
        long misses = Registry.DEADLINE_MISSES.sum();
        m.put("position_reports", Registry.POSITION_REPORTS.sum());
        m.put("other_records", Registry.OTHER_RECORDS.sum());
        m.put("toll_notifications", 0);
        m.put("accident_alerts", 0);
        m.put("toll_assessments", 0);
        m.put("lachesis_notifications", branches);
        m.put("deadline_outputs", outputs);
        m.put("deadline_misses", misses);
        m.put("deadline_miss_share", outputs == 0 ? 0.0 : (double) misses / outputs);
        m.put("max_latency_ms", Registry.MAX_E2E_NS.get() / 1e6);
        return m;
    }

    @SuppressWarnings("unchecked")
    private static void print(Map<String, Object> s, boolean json, PrintStream out) {
        Map<String, Object> l = (Map<String, Object>) s.get("latency_ms");
        Map<String, Object> e = (Map<String, Object>) s.get("e2e_latency_ms");
        double rate = (double) s.get("offered_rate");
        out.printf("workload          %s on Apache Flink %s (%s task threads, parallelism %s)%n", s.get("workload"),
                s.get("flink_version"), s.get("threads"), s.get("parallelism"));
        out.printf("offered rate      %s%n", rate == 0 ? "as fast as possible" : String.format("%.0f tuples/s", rate));
        out.printf("ingress           %.0f tuples/s over %.2f s after warm-up%n", s.get("ingress_tps"),
                s.get("measured_s"));
        out.printf("egress            %.0f tuples/s%n", s.get("egress_tps"));
        out.printf("tuples            %s in, %s out%n", s.get("tuples_in"), s.get("tuples_out"));
        out.printf("latency (ms)      %s%n", latencyLine(l));
        out.printf("end-to-end (ms)   %s%n", latencyLine(e));
        out.printf("CPU use           %.2f cores (JVM process, measured window)%n", s.get("cpu_cores"));
        out.printf("start-up          %.1f s from JVM start to the sources' start%n", s.get("startup_s"));
        if (s.containsKey("workload_stats")) {
            out.printf("linear-road       %s%n", Json.write(s.get("workload_stats")));
        }
        if (json) {
            out.println(Json.write(s));
        }
        out.flush();
    }

    private static String latencyLine(Map<String, Object> l) {
        return String.format("mean %.3f  p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f", l.get("mean"), l.get("p50"),
                l.get("p99"), l.get("p999"), l.get("max"));
    }
}
