package moirai.flink;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.sink.RichSinkFunction;

/**
 * The sink of every query: counts what leaves the job and records, for tuples that leave after the
 * warm-up (the rule of moirai's engine, which starts its histograms afresh when the warm-up ends),
 * processing latency (egress − ingress) and end-to-end latency (egress − intended) in
 * HdrHistograms (ns, 3 significant digits), merged into {@link Registry} when it closes.
 *
 * @param <T> the tuples it takes
 */
class LatencySink<T extends Stamped> extends RichSinkFunction<T> {
    private static final long serialVersionUID = 1L;

    private transient Histogram latency;
    private transient Histogram e2e;
    private transient Registry.SinkMeter meter;
    private transient long received;
    private transient long measured;
    private transient long windowStart;
    private transient long windowEnd;

    @Override
    public void open(OpenContext context) throws Exception {
        super.open(context);
        latency = new Histogram(3);
        e2e = new Histogram(3);
        meter = new Registry.SinkMeter();
        Registry.SINKS.add(meter);
        Registry.SUBTASKS.incrementAndGet();
    }

    @Override
    public void invoke(T t, Context context) {
        long egress = System.nanoTime();
        if (windowEnd == 0) {
            // Tuples come from sources, which mark the start before they emit.
            windowStart = Registry.windowStartNs();
            windowEnd = Registry.windowEndNs();
        }
        received++;
        if (egress - windowStart >= 0 && egress - windowEnd < 0) {
            measured++;
        }
        long e2eNs = Math.max(0, egress - t.intendedNs);
        if (egress - windowStart >= 0) {
            latency.recordValue(Math.max(0, egress - t.ingressNs));
            e2e.recordValue(e2eNs);
        }
        accept(t, e2eNs);
        if ((received & 63) == 0) {
            meter.progress(received, measured);
        }
    }

    /** What a workload does with each tuple besides measuring it (nothing by default). */
    void accept(T t, long e2eNs) {}

    @Override
    public void close() throws Exception {
        if (meter != null) {
            meter.progress(received, measured);
            Registry.merge(latency, e2e);
        }
        super.close();
    }
}
