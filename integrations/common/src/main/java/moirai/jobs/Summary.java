package moirai.jobs;

import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Map;

import org.HdrHistogram.Histogram;

/** The parts of a job's summary every engine's {@code Run} writes alike. */
public final class Summary {
    private Summary() {}

    /** CPU time of this JVM so far, ns. */
    public static long processCpuNs() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
            return Math.max(0, sun.getProcessCpuTime());
        }
        return 0;
    }

    /** A histogram of ns as moirai's {@code LatencySummary}: ms, zeros when empty. */
    public static Map<String, Object> latency(Histogram h) {
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

    /** One point of the timeline. */
    public static Map<String, Object> point(double tS, double ingressTps, double egressTps, long backlog) {
        Map<String, Object> point = Json.object();
        point.put("t_s", tS);
        point.put("ingress_tps", ingressTps);
        point.put("egress_tps", egressTps);
        point.put("backlog", backlog);
        return point;
    }

    /** The workload's own fields of the summary (after the engine's). */
    public static void workloadFields(Map<String, Object> s, Options o, double spinRate, List<SynDraw.QueryParams> params) {
        if (o.workload.equals("syn")) {
            s.put("queries", o.syn.queries);
            s.put("ops", o.syn.ops);
            s.put("cost_ns", o.syn.costNs);
            s.put("selectivity", o.syn.selectivity);
            if (o.syn.heavyOp > 0) {
                s.put("heavy_op", o.syn.heavyOp);
                s.put("heavy_factor", o.syn.heavyFactor);
            }
            if (o.lachesis) {
                s.put("lachesis", true);
            }
            if (o.syn.blocking) {
                s.put("blocking", true);
            }
            // As moirai's SynConfig: the offered rate per query.
            s.put("rate", o.rate / o.syn.queries);
            s.put("spin_iterations_per_ns", spinRate);
            s.put("syn_params", SynDraw.toJson(params));
        } else {
            s.put("shape", "lachesis");
            s.put("xways", o.traffic.xways);
            s.put("traffic_s", o.traffic.durationS);
            s.put("cars_per_second", o.traffic.carsPerSecond);
            s.put("workload_stats", linearRoadStats());
        }
    }

    /** What the Linear Road job counted, as moirai's {@code LinearRoadReport}. */
    public static Map<String, Object> linearRoadStats() {
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

    /**
     * Prints the summary for people, then (with {@code json}) as one line of JSON; {@code engine}
     * names the system in the first line, e.g. {@code "Apache Flink 1.20.3"}, {@code threads} what
     * the thread count counts.
     */
    @SuppressWarnings("unchecked")
    public static void print(Map<String, Object> s, boolean json, PrintStream out, String engine, String threads) {
        Map<String, Object> l = (Map<String, Object>) s.get("latency_ms");
        Map<String, Object> e = (Map<String, Object>) s.get("e2e_latency_ms");
        double rate = (double) s.get("offered_rate");
        out.printf("workload          %s on %s (%s %s, parallelism %s)%n", s.get("workload"), engine, s.get("threads"),
                threads, s.get("parallelism"));
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
