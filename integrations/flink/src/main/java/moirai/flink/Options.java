package moirai.flink;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The command line of {@link Run}: {@code <workload> [flags]}, mirroring
 * {@code moirai run <workload>}. Flags take their value as the next argument or after {@code =}.
 */
final class Options {
    /** What is wrong with the command line; the message names the flag and how to fix it. */
    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    static final String USAGE = String.join("\n",
            "moirai-flink: moirai's workloads as Apache Flink jobs (a local MiniCluster in this JVM, with the",
            "REST API and web UI on 127.0.0.1), for `moirai schedule` to steer.",
            "",
            "Usage: java -cp moirai-flink-jobs.jar:$(cat classpath.txt) moirai.flink.Run <workload> [flags]",
            "",
            "Workloads:",
            "  syn                  per query: source -> op1 ... opK (CPU cost, selectivity) -> sink",
            "  linear-road (lr)     Linear Road, the 9-operator shape of the Lachesis evaluation",
            "",
            "Flags of every workload:",
            "  --rate R             offered tuples/s in total over all queries and source instances,",
            "                       0 = as fast as possible [default: 0]",
            "  --ramp-to R2         ramp the offered rate linearly from --rate to R2 over the whole --duration",
            "  --duration D         how long the sources produce, e.g. 500ms, 30s, 2m, 1h [default: 5s]",
            "  --warmup F           share of the run discarded before measuring, in [0, 0.9) [default: 0.2]",
            "  --seed N             seed of the draws [default: 0]",
            "  --parallelism P      instances of every operator, source and sink included [default: 1]",
            "  --rest-port N        port of Flink's REST API and web UI on 127.0.0.1 [default: 8081]",
            "  --buffer-timeout-ms T  Flink's network buffer timeout, ms; 0 = flush every record,",
            "                       -1 = only full buffers [default: 100, Flink's default]",
            "  --json               print the summary as one JSON object on the last line of stdout",
            "  -h, --help           print this help",
            "",
            "syn:",
            "  --queries Q          independent queries [default: 1]",
            "  --ops K              operators between source and sink, per query [default: 5]",
            "  --cost-ns C          CPU time per tuple and operator, ns, a calibrated busy loop [default: 0]",
            "  --selectivity S      output tuples per input tuple of each operator [default: 1]",
            "  --heavy-op K         operator K (from 1) costs --heavy-factor times as much: one bottleneck",
            "  --heavy-factor F     how much heavier [default: 4]",
            "",
            "linear-road:",
            "  --shape lachesis     the only shape these jobs implement [default: lachesis]",
            "  --xways X            expressways to generate per source instance [default: 1]",
            "  --cars-per-second C  cars entering each expressway per second [default: 20]",
            "  --traffic T          simulated time of one lap of generated traffic; the stream loops",
            "                       with the next seed [default: 3h]",
            "");

    String workload;
    boolean help;
    double rate = 0;
    Double rampTo;
    long durationNs = 5_000_000_000L;
    double warmup = 0.2;
    long seed = 0;
    int parallelism = 1;
    int restPort = 8081;
    long bufferTimeoutMs = 100;
    boolean json;

    final Syn.Config syn = new Syn.Config();
    private boolean heavyFactorGiven;
    final LrGenerator.Config traffic = new LrGenerator.Config();

    /** Parses and checks {@code args}. */
    static Options parse(String[] args) throws UsageError {
        Options o = new Options();
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
            case "--rest-port" -> restPort = (int) integer(flag, value, 1, 65_535);
            case "--buffer-timeout-ms" -> bufferTimeoutMs = integer(flag, value, -1, 3_600_000);
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
            case "--queries" -> syn.queries = (int) integer(flag, value, 1, 10_000);
            case "--ops" -> syn.ops = (int) integer(flag, value, 0, 10_000);
            case "--cost-ns" -> syn.costNs = integer(flag, value, 0, 60_000_000_000L);
            case "--selectivity" -> syn.selectivity = number(flag, value);
            case "--heavy-op" -> syn.heavyOp = (int) integer(flag, value, 1, 10_000);
            case "--heavy-factor" -> {
                syn.heavyFactor = integer(flag, value, 1, 1000);
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
        if (durationNs <= 0) {
            throw new UsageError("--duration must be positive, e.g. --duration 30s");
        }
        if (!(warmup >= 0 && warmup < 0.9)) {
            throw new UsageError("--warmup " + warmup + " must be a share of the run in [0, 0.9), e.g. 0.2");
        }
        if (workload.equals("syn")) {
            if (!(Double.isFinite(syn.selectivity) && syn.selectivity >= 0)) {
                throw new UsageError("--selectivity " + syn.selectivity + " must be a finite number >= 0");
            }
            if (syn.heavyOp > syn.ops) {
                throw new UsageError("--heavy-op " + syn.heavyOp + " is not one of the " + syn.ops
                        + " operators (1 to " + syn.ops + ")");
            }
            if (heavyFactorGiven && syn.heavyOp == 0) {
                throw new UsageError("--heavy-factor needs --heavy-op K, the operator it makes heavier");
            }
            syn.seed = seed;
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
    static long duration(String flag, String value) throws UsageError {
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
