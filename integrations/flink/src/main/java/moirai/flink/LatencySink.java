package moirai.flink;

import org.apache.flink.api.connector.sink2.SinkWriter;

import moirai.jobs.LatencyMeter;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * The sink of every query, a Sink v2 (the same on Flink 1.20 and 2.x): each subtask's writer
 * counts what leaves the job and records, for tuples that leave after the warm-up, processing
 * latency (egress − ingress) and end-to-end latency (egress − intended) in a {@link LatencyMeter}
 * (the measuring, apart from Flink's API), merged into {@link Registry} when it closes.
 * Workloads add to it through the hooks; each subtask has its own copy of the sink (Flink
 * deserializes one per task), so the hooks may keep per-subtask state in transient fields.
 *
 * @param <T> the tuples it takes
 */
class LatencySink<T extends Stamped> extends SinkEntry<T> {
    private static final long serialVersionUID = 1L;

    @Override
    SinkWriter<T> writer() {
        return new Writer();
    }

    /** What a workload prepares when the subtask starts (nothing by default). */
    void open() {}

    /** What a workload does with each tuple before it is measured (nothing by default). */
    void before(T t) {}

    /** What a workload does with each tuple besides measuring it (nothing by default). */
    void accept(T t, long e2eNs) {}

    /** What a workload does when the subtask ends, before the meter closes (nothing by default). */
    void end() {}

    /** One subtask's writer. */
    private final class Writer implements SinkWriter<T> {
        private final LatencyMeter meter = new LatencyMeter();
        private boolean closed;

        Writer() {
            Registry.SUBTASKS.incrementAndGet();
            open();
        }

        @Override
        public void write(T t, Context context) {
            before(t);
            long e2eNs = meter.record(t);
            accept(t, e2eNs);
        }

        @Override
        public void flush(boolean endOfInput) {}

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                end();
                meter.close();
            }
        }
    }
}
