package moirai.jobs;

import org.HdrHistogram.Histogram;

/**
 * What every sink instance measures: counts what leaves the job and records, for tuples that leave
 * after the warm-up (the rule of moirai's engine, which starts its histograms afresh when the
 * warm-up ends), processing latency (egress − ingress) and end-to-end latency (egress − intended)
 * in HdrHistograms (ns, 3 significant digits), merged into {@link Registry} when it closes.
 */
public final class LatencyMeter {
    private final Histogram latency = new Histogram(3);
    private final Histogram e2e = new Histogram(3);
    private final Registry.SinkMeter meter = new Registry.SinkMeter();
    private long received;
    private long measured;
    private long windowStart;
    private long windowEnd;
    private boolean closed;

    /** A meter registered with {@link Registry}. */
    public LatencyMeter() {
        Registry.SINKS.add(meter);
    }

    /** Records one tuple leaving now; returns its end-to-end latency, ns. */
    public long record(Stamped t) {
        long egress = System.nanoTime();
        if (windowEnd == 0) {
            // Tuples come from sources, which mark the start before they emit; in a JVM that runs
            // no source (a TaskManager of a cluster holding only sinks) the first tuple's intended
            // time stands for it (the same monotonic clock on one machine).
            Registry.markStart(t.intendedNs);
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
        if ((received & 63) == 0) {
            meter.progress(received, measured);
        }
        return e2eNs;
    }

    /** Tuples received so far. */
    public long received() {
        return received;
    }

    /** Tuples received during the measured window. */
    public long measured() {
        return measured;
    }

    /** Its processing and end-to-end latency histograms (not copies). */
    public Histogram[] histograms() {
        return new Histogram[] {latency, e2e};
    }

    /** Publishes the counts and merges the histograms into {@link Registry} (once). */
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        meter.progress(received, measured);
        Registry.merge(latency, e2e);
    }
}
