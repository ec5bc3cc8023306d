package moirai.jobs;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The command line of the jobs' {@code Run} (Flink's and Storm's): {@code <workload> [flags]},
 * mirroring {@code moirai run <workload>}; each engine adds its own flags ({@link Engine}). Flags take their value as the next argument or after {@code =}.
 */
public final class Options {
    /** What is wrong with the command line; the message names the flag and how to fix it. */
    public static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        public UsageError(String message) {
            super(message);
        }
    }

    /** The engine whose job reads the command line: it decides the engine's own flags. */
    public enum Engine {
        /** {@code moirai.flink.Run}: {@code --rest-port}, {@code --buffer-timeout-ms}. */
        FLINK,
        /**
         * {@code moirai.storm.Run}: {@code --metrics-dir}, {@code --report-period}, {@code --workers},
         * {@code --wait-strategy}.
         */
        STORM,
        /** No job (e.g. {@link SynDraw}): only the workloads' flags. */
        NONE
    }

    /** The usage text of {@code engine}'s job. */
    public static String usage(Engine engine) {
        List<String> l = new ArrayList<>();
        switch (engine) {
            case FLINK -> {
                l.add("moirai-flink: moirai's workloads as Apache Flink jobs (a local MiniCluster in this JVM, with the");
                l.add("REST API and web UI on 127.0.0.1), for `moirai schedule` to steer.");
                l.add("");
                l.add("Usage: java -cp moirai-flink-jobs.jar:$(cat classpath.txt) moirai.flink.Run <workload> [flags]");
            }
            case STORM -> {
                l.add("moirai-storm: moirai's workloads as Apache Storm topologies (a LocalCluster in this JVM, metrics");
                l.add("as CSV files every second), for `moirai schedule` to steer.");
                l.add("");
                l.add("Usage: java -cp moirai-storm-jobs.jar:$(cat classpath.txt) moirai.storm.Run <workload> [flags]");
            }
            case NONE -> {
                l.add("moirai SynDraw: the parameters moirai's SYN draws, as JSON, without running a job.");
                l.add("");
                l.add("Usage: java -cp <jar> moirai.jobs.SynDraw [syn flags] [--bits]");
            }
        }
        l.add("");
        l.add("Workloads:");
        l.add("  syn                  per query: source -> op1 ... opK (CPU cost, selectivity) -> sink");
        l.add("  linear-road (lr)     Linear Road, the 9-operator shape of the Lachesis evaluation");
        l.add("");
        l.add("Flags of every workload:");
        l.add("  --rate R             offered tuples/s in total over all queries and source instances,");
        l.add("                       0 = as fast as possible [default: 0]");
        l.add("  --ramp-to R2         ramp the offered rate linearly from --rate to R2 over the whole --duration");
        l.add("  --duration D         how long the sources produce, e.g. 500ms, 30s, 2m, 1h [default: 5s]");
        l.add("  --warmup F           share of the run discarded before measuring, in [0, 0.9) [default: 0.2]");
        l.add("  --seed N             seed of the draws [default: 0]");
        l.add("  --parallelism P      instances of every operator, source and sink included [default: 1]");
        if (engine == Engine.FLINK) {
            l.add("  --rest-port N        port of Flink's REST API and web UI on 127.0.0.1 [default: 8081]");
            l.add("  --metrics-port N     serve the subtasks' metrics the middleware reads on port N (Flink's");
            l.add("                       Prometheus reporter, http://127.0.0.1:N/metrics) [default: none]");
            l.add("  --jobmanager H:P     submit the job to the running standalone cluster whose REST API is");
            l.add("                       at H:P (the job jar is shipped with it) instead of a MiniCluster here");
            l.add("  --buffer-timeout-ms T  Flink's network buffer timeout, ms; 0 = flush every record,");
            l.add("                       -1 = only full buffers [default: 100, Flink's default]");
        }
        if (engine == Engine.STORM) {
            l.add("  --metrics-dir DIR    where Storm's CsvStormReporter writes the metrics, one CSV file per");
            l.add("                       metric, every --report-period [default: a fresh temporary directory]");
            l.add("  --report-period S    how often the reporter writes the metrics, in seconds (Storm's own");
            l.add("                       default is 10; the middleware wants 1) [default: 1]");
            l.add("  --workers W          worker slots of the topology, threads of this JVM [default: 1]");
            l.add("  --wait-strategy S    how idle executors wait (Storm's spout, bolt and backpressure wait");
            l.add("                       strategies): progressive (Storm's default: spin, then 1000 x");
            l.add("                       parkNanos(1), then 1 ms sleeps) or park[:MICROS] (WaitStrategyPark,");
            l.add("                       LockSupport.parkNanos of MICROS us each time; 100 if not given)");
            l.add("                       [default: progressive]");
        }
        l.add("  --json               print the summary as one JSON object on the last line of stdout");
        l.add("  -h, --help           print this help");
        l.add("");
        l.add("syn:");
        l.add("  --lachesis           start from the Lachesis evaluation's SYN (20 queries x 3 operators, per-query");
        l.add("                       cost C*2^U{0..5} with +-10 % per operator, drawn selectivities, sinks with");
        l.add("                       cost); the flags below override it");
        l.add("  --queries Q          independent queries [default: 1; 20 with --lachesis]");
        l.add("  --ops K              operators between source and sink, per query [default: 5; 3 with --lachesis]");
        l.add("  --cost-ns C          CPU time per tuple and operator, ns, a calibrated busy loop [default: 0;");
        l.add("                       1000 with --lachesis]");
        l.add("  --selectivity S      output tuples per input tuple of each operator [default: 1]");
        l.add("  --blocking           make 10 % of the operators block (sleep up to 200 ms with probability");
        l.add("                       0.001 per tuple)");
        l.add("  --heavy-op K         operator K (from 1) costs --heavy-factor times as much: one bottleneck");
        l.add("  --heavy-factor F     how much heavier [default: 4]");
        l.add("");
        l.add("linear-road:");
        l.add("  --shape lachesis     the only shape these jobs implement [default: lachesis]");
        l.add("  --xways X            expressways to generate per source instance [default: 1]");
        l.add("  --cars-per-second C  cars entering each expressway per second [default: 20]");
        l.add("  --traffic T          simulated time of one lap of generated traffic; the stream loops");
        l.add("                       with the next seed [default: 3h]");
        l.add("");
        return String.join("\n", l);
    }

    public String workload;
    public boolean help;
    public double rate = 0;
    public Double rampTo;
    public long durationNs = 5_000_000_000L;
    public double warmup = 0.2;
    public long seed = 0;
    public int parallelism = 1;
    public int restPort = 8081;
    /** Flink: the Prometheus reporter's port in the MiniCluster; 0 = no reporter. */
    public int metricsPort = 0;
    public long bufferTimeoutMs = 100;
    /** Flink: the REST address {@code host:port} of a standalone cluster's JobManager; null = a MiniCluster. */
    public String jobmanager;
    /** Storm: where the CSV reporter writes; null = a fresh temporary directory. */
    public String metricsDir;
    /** Storm: worker slots. */
    public int workers = 1;
    /** Storm: how often the CSV reporter writes, in seconds (Storm's own default is 10). */
    public int reportPeriodS = 1;
    /**
     * Storm: the park time of {@code WaitStrategyPark} in microseconds for every wait situation
     * (spout, bolt, backpressure), or null for Storm's default {@code WaitStrategyProgressive}.
     */
    public Long parkMicros;
    public boolean json;
    /** The engine whose flags these are. */
    public Engine engine;

    /** SYN's parameters (set when the command line is checked; {@code --rate} is not among them). */
    public SynConfig syn = new SynConfig();
    /** SYN: whether {@code --lachesis} was given. */
    public boolean lachesis;
    private boolean heavyFactorGiven;
    private Integer queries;
    private Integer ops;
    private Long costNs;
    private Double selectivity;
    private boolean blocking;
    private int heavyOp;
    private long heavyFactor = 4;
    public final LrGenerator.Config traffic = new LrGenerator.Config();

    /** Parses and checks {@code args}. */
    public static Options parse(String[] args, Engine engine) throws UsageError {
        Options o = new Options();
        o.engine = engine;
        if (args.length == 0) {
            throw new UsageError("name a workload: syn or linear-road");
        }
        int i = 0;
        String first = args[0];
        if (first.equals("-h") || first.equals("--help")) {
            o.help = true;
            return o;
        }
        switch (first) {
            case "syn" -> o.workload = "syn";
            case "linear-road", "lr" -> o.workload = "linear-road";
            default -> throw new UsageError(first.startsWith("-")
                    ? "name the workload before the flags: syn or linear-road (got " + first + ")"
                    : "unknown workload '" + first + "'; use syn or linear-road");
        }
        i++;
        while (i < args.length) {
            String arg = args[i++];
            if (arg.equals("-h") || arg.equals("--help")) {
                o.help = true;
                continue;
            }
            if (arg.equals("--json")) {
                o.json = true;
                continue;
            }
            if (o.workload.equals("syn") && arg.equals("--lachesis")) {
                o.lachesis = true;
                continue;
            }
            if (o.workload.equals("syn") && arg.equals("--blocking")) {
                o.blocking = true;
                continue;
            }
            if (!arg.startsWith("--")) {
                throw new UsageError("unexpected argument '" + arg + "'; flags start with --, e.g. --rate 20000");
            }
            String flag = arg;
            String value;
            int eq = arg.indexOf('=');
            if (eq > 0) {
                flag = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            } else if (i < args.length) {
                value = args[i++];
            } else {
                throw new UsageError(flag + " needs a value, e.g. " + flag + " " + example(flag));
            }
            o.set(flag, value);
        }
        o.check();
        return o;
    }

    private static String example(String flag) {
        return switch (flag) {
            case "--duration", "--traffic" -> "30s";
            case "--warmup" -> "0.2";
            case "--shape" -> "lachesis";
            case "--selectivity" -> "0.5";
            case "--rest-port" -> "18081";
            case "--metrics-port" -> "19249";
            case "--jobmanager" -> "10.0.0.1:8081";
            case "--metrics-dir" -> "/tmp/storm-metrics";
            case "--wait-strategy" -> "park";
            case "--rate", "--ramp-to" -> "20000";
            case "--cost-ns" -> "1000";
            case "--seed" -> "42";
            case "--cars-per-second" -> "20";
            default -> "1";
        };
    }

    private void set(String flag, String value) throws UsageError {
        boolean syn = workload.equals("syn");
        switch (flag) {
            case "--rate" -> rate = number(flag, value);
            case "--ramp-to" -> rampTo = number(flag, value);
            case "--duration" -> durationNs = duration(flag, value);
            case "--warmup" -> warmup = number(flag, value);
            case "--seed" -> seed = unsigned(flag, value);
            case "--parallelism" -> parallelism = (int) integer(flag, value, 1, 256);
            case "--rest-port" -> {
                requireEngine(flag, Engine.FLINK);
                restPort = (int) integer(flag, value, 1, 65_535);
            }
            case "--metrics-port" -> {
                requireEngine(flag, Engine.FLINK);
                metricsPort = (int) integer(flag, value, 1, 65_535);
            }
            case "--jobmanager" -> {
                requireEngine(flag, Engine.FLINK);
                int colon = value.lastIndexOf(':');
                if (colon <= 0) {
                    throw new UsageError("--jobmanager needs HOST:PORT of the cluster's REST API, e.g. --jobmanager 10.0.0.1:8081");
                }
                integer(flag, value.substring(colon + 1), 1, 65_535);
                jobmanager = value;
            }
            case "--buffer-timeout-ms" -> {
                requireEngine(flag, Engine.FLINK);
                bufferTimeoutMs = integer(flag, value, -1, 3_600_000);
            }
            case "--metrics-dir" -> {
                requireEngine(flag, Engine.STORM);
                if (value.isBlank()) {
                    throw new UsageError("--metrics-dir needs a directory, e.g. --metrics-dir /tmp/storm-metrics");
                }
                metricsDir = value;
            }
            case "--workers" -> {
                requireEngine(flag, Engine.STORM);
                workers = (int) integer(flag, value, 1, 64);
            }
            case "--report-period" -> {
                requireEngine(flag, Engine.STORM);
                reportPeriodS = (int) integer(flag, value, 1, 3600);
            }
            case "--wait-strategy" -> {
                requireEngine(flag, Engine.STORM);
                parkMicros = waitStrategy(value);
            }
            default -> {
                if (syn) {
                    setSyn(flag, value);
                } else {
                    setLinearRoad(flag, value);
                }
            }
        }
    }

    private void setSyn(String flag, String value) throws UsageError {
        switch (flag) {
            case "--queries" -> queries = (int) integer(flag, value, 1, 10_000);
            case "--ops" -> ops = (int) integer(flag, value, 0, 10_000);
            case "--cost-ns" -> costNs = integer(flag, value, 0, SynConfig.MAX_COST_NS);
            case "--selectivity" -> selectivity = number(flag, value);
            case "--heavy-op" -> heavyOp = (int) integer(flag, value, 1, 10_000);
            case "--heavy-factor" -> {
                heavyFactor = integer(flag, value, 1, SynConfig.MAX_HEAVY_FACTOR);
                heavyFactorGiven = true;
            }
            default -> throw unknown(flag, "syn");
        }
    }

    private void setLinearRoad(String flag, String value) throws UsageError {
        switch (flag) {
            case "--shape" -> {
                if (!value.equals("lachesis")) {
                    throw new UsageError("--shape " + value + ": the Flink jobs implement only the Lachesis shape of "
                            + "Linear Road; use --shape lachesis (the faithful query runs on moirai's engine: "
                            + "moirai run linear-road)");
                }
            }
            case "--xways" -> traffic.xways = (int) integer(flag, value, 1, 256);
            case "--cars-per-second" -> traffic.carsPerSecond = number(flag, value);
            case "--traffic" -> {
                long ns = duration(flag, value);
                traffic.durationS = (int) Math.min(Integer.MAX_VALUE, ns / 1_000_000_000L);
            }
            default -> throw unknown(flag, "linear-road");
        }
    }

    /** {@code progressive} → null; {@code park} → 100 (Storm's default park time); {@code park:N} → N. */
    private static Long waitStrategy(String value) throws UsageError {
        if (value.equals("progressive")) {
            return null;
        }
        if (value.equals("park")) {
            return 100L;
        }
        if (value.startsWith("park:")) {
            long micros;
            try {
                micros = Long.parseLong(value.substring(5).trim());
            } catch (NumberFormatException e) {
                micros = -1;
            }
            // 0 would make WaitStrategyPark busy-poll: the opposite of what the flag is for.
            if (micros < 1 || micros > 1_000_000) {
                throw new UsageError("--wait-strategy " + value + ": the park time is a number of microseconds in "
                        + "1..1000000, e.g. --wait-strategy park:100");
            }
            return micros;
        }
        throw new UsageError("--wait-strategy " + value + ": use progressive (Storm's default) or park[:MICROS], "
                + "e.g. --wait-strategy park:100");
    }

    private void requireEngine(String flag, Engine needed) throws UsageError {
        if (engine != needed) {
            throw new UsageError(flag + " is a flag of the " + (needed == Engine.FLINK ? "Flink" : "Storm")
                    + " jobs only" + (engine == Engine.NONE ? "" : "; leave it out") + "; see the flags below");
        }
    }

    private static UsageError unknown(String flag, String workload) {
        return new UsageError("unknown flag " + flag + " for " + workload + "; see the flags below");
    }

    private void check() throws UsageError {
        if (!(Double.isFinite(rate) && rate >= 0)) {
            throw new UsageError("--rate " + rate + " must be a number >= 0 (0 = as fast as possible)");
        }
        if (rampTo != null && !(Double.isFinite(rampTo) && rampTo > 0 && rate > 0)) {
            throw new UsageError("--ramp-to " + rampTo + " needs a positive target and a positive --rate to start from");
        }
        if (metricsPort != 0 && jobmanager != null) {
            throw new UsageError("--metrics-port configures the MiniCluster's reporter; a standalone cluster's "
                    + "TaskManagers take theirs from its configuration (see integrations/flink/README.md): drop "
                    + "--metrics-port or --jobmanager");
        }
        if (metricsPort != 0 && metricsPort == restPort) {
            throw new UsageError("--metrics-port " + metricsPort + " is the REST port too: pick another one");
        }
        if (durationNs <= 0) {
            throw new UsageError("--duration must be positive, e.g. --duration 30s");
        }
        if (!(warmup >= 0 && warmup < 0.9)) {
            throw new UsageError("--warmup " + warmup + " must be a share of the run in [0, 0.9), e.g. 0.2");
        }
        if (workload.equals("syn")) {
            SynConfig c = lachesis ? SynConfig.lachesis() : new SynConfig();
            c.queries = queries != null ? queries : c.queries;
            c.ops = ops != null ? ops : c.ops;
            c.costNs = costNs != null ? costNs : c.costNs;
            c.selectivity = selectivity != null ? selectivity : c.selectivity;
            c.blocking = blocking;
            if (!(Double.isFinite(c.selectivity) && c.selectivity >= 0)) {
                throw new UsageError("--selectivity " + c.selectivity + " must be a finite number >= 0");
            }
            if (heavyOp > c.ops) {
                throw new UsageError("--heavy-op " + heavyOp + " is not one of the " + c.ops
                        + " operators (1 to " + c.ops + ")");
            }
            if (heavyFactorGiven && heavyOp == 0) {
                throw new UsageError("--heavy-factor needs --heavy-op K, the operator it makes heavier");
            }
            c.heavyOp = heavyOp;
            c.heavyFactor = heavyFactor;
            c.seed = seed;
            String problem = c.validate();
            if (problem != null) {
                throw new UsageError(problem);
            }
            syn = c;
        } else {
            traffic.seed = seed;
            String problem = traffic.validate();
            if (problem != null) {
                throw new UsageError(problem);
            }
        }
    }

    private static double number(String flag, String value) throws UsageError {
        try {
            double v = Double.parseDouble(value.trim());
            if (Double.isNaN(v)) {
                throw new NumberFormatException();
            }
            return v;
        } catch (NumberFormatException e) {
            throw new UsageError(flag + " '" + value + "' is not a number; e.g. " + flag + " " + example(flag));
        }
    }

    private static long integer(String flag, String value, long min, long max) throws UsageError {
        long v;
        try {
            v = Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            throw new UsageError(flag + " '" + value + "' is not an integer; e.g. " + flag + " " + example(flag));
        }
        if (v < min || v > max) {
            throw new UsageError(flag + " " + v + " is out of range: use " + min + ".." + max);
        }
        return v;
    }

    private static long unsigned(String flag, String value) throws UsageError {
        try {
            return Long.parseUnsignedLong(value.trim());
        } catch (NumberFormatException e) {
            throw new UsageError(flag + " '" + value + "' is not an integer in 0..2^64-1; e.g. " + flag + " 42");
        }
    }

    private static final Pattern PART = Pattern.compile("\\s*(\\d+(?:\\.\\d+)?)\\s*([a-zA-Zµ]+)");

    /** A humantime-like duration: {@code 500ms}, {@code 30s}, {@code 2m}, {@code 1h}, {@code 1m30s}. */
    public static long duration(String flag, String value) throws UsageError {
        String text = value.trim();
        Matcher m = PART.matcher(text);
        double ns = 0;
        int end = 0;
        while (m.find() && m.start() == end) {
            double n = Double.parseDouble(m.group(1));
            double unit = switch (m.group(2).toLowerCase(Locale.ROOT)) {
                case "ns", "nsec" -> 1;
                case "us", "µs", "usec" -> 1e3;
                case "ms", "msec" -> 1e6;
                case "s", "sec", "secs", "second", "seconds" -> 1e9;
                case "m", "min", "mins", "minute", "minutes" -> 60e9;
                case "h", "hr", "hrs", "hour", "hours" -> 3600e9;
                case "d", "day", "days" -> 86_400e9;
                default -> -1;
            };
            if (unit < 0) {
                break;
            }
            ns += n * unit;
            end = m.end();
        }
        if (end == 0 || end != text.length()) {
            throw new UsageError(flag + " '" + value + "' is not a duration; use a number with a unit, e.g. "
                    + flag + " 30s (units: ms, s, m, h)");
        }
        return (long) ns;
    }
}
