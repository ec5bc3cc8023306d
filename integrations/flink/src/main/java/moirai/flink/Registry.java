package moirai.flink;

import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.HdrHistogram.Histogram;

/**
 * What the job's tasks measure, collected for the main thread. The local environment runs the
 * whole job (a MiniCluster) in this JVM and the job's classes come from the application class
 * path, so static collectors are shared by all tasks and read by {@link Run} while the job runs
 * (throughput, backlog) and after it finished (latency histograms, merged by each sink at close).
 */
final class Registry {
    private Registry() {}

    /** How long the sources run, ns; set by {@link Run} before the job starts. */
    static volatile long durationNs;
    /** Share of the run discarded as warm-up; set by {@link Run} before the job starts. */
    static volatile double warmup;

    /** {@link System#nanoTime()} when the first source instance started; 0 = not yet. */
    private static final AtomicLong START_NS = new AtomicLong();
    /** Wall-clock time of about the same instant, ms since the epoch (0 until it is known). */
    static volatile long startEpochMs;

    /** Every source instance's meter. */
    static final Queue<SourceMeter> SOURCES = new ConcurrentLinkedQueue<>();
    /** Every sink instance's meter. */
    static final Queue<SinkMeter> SINKS = new ConcurrentLinkedQueue<>();
    /** Subtasks (task threads) that opened: sources, operators and sinks. */
    static final AtomicInteger SUBTASKS = new AtomicInteger();

    /** Processing latency of tuples that entered after the warm-up, ns; merged at sink close. */
    static final Histogram LATENCY = new Histogram(3);
    /** End-to-end latency of the same tuples, ns. */
    static final Histogram E2E_LATENCY = new Histogram(3);

    /** Linear Road: position reports the dispatchers passed on. */
    static final LongAdder POSITION_REPORTS = new LongAdder();
    /** Linear Road: records the dispatchers dropped (not position reports). */
    static final LongAdder OTHER_RECORDS = new LongAdder();
    /** Linear Road: notifications out of each toll operator, {@code [pos, cv, las]}. */
    static final LongAdder[] LACHESIS_NOTIFICATIONS = {new LongAdder(), new LongAdder(), new LongAdder()};
    /** Linear Road: outputs whose end-to-end latency exceeded the benchmark's 5 s deadline. */
    static final LongAdder DEADLINE_MISSES = new LongAdder();
    /** Linear Road: the largest end-to-end latency of an output, ns. */
    static final AtomicLong MAX_E2E_NS = new AtomicLong();

    /** Marks the start of the run (the first source instance to start wins); returns the start. */
    static long markStart(long nowNs) {
        if (START_NS.compareAndSet(0, nowNs)) {
            startEpochMs = System.currentTimeMillis();
        }
        return START_NS.get();
    }

    /** Start of the measured window, ns ({@link System#nanoTime()}); valid once started. */
    static long windowStartNs() {
        return START_NS.get() + (long) (durationNs * warmup);
    }

    /** End of the measured window (the end of the run), ns; valid once started. */
    static long windowEndNs() {
        return START_NS.get() + durationNs;
    }

    /** {@link System#nanoTime()} when the run started, 0 before. */
    static long startNs() {
        return START_NS.get();
    }

    /** Adds a finished sink's histograms. */
    static synchronized void merge(Histogram latency, Histogram e2e) {
        LATENCY.add(latency);
        E2E_LATENCY.add(e2e);
    }

    /** Copies of the merged histograms. */
    static synchronized Histogram[] latencies() {
        return new Histogram[] {LATENCY.copy(), E2E_LATENCY.copy()};
    }

    /** Tuples emitted by all sources so far. */
    static long emitted() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.emitted();
        }
        return n;
    }

    /** Tuples emitted by all sources during the measured window (final once the sources ended). */
    static long emittedMeasured() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.measured();
        }
        return n;
    }

    /** Tuples received by all sinks so far. */
    static long received() {
        long n = 0;
        for (SinkMeter s : SINKS) {
            n += s.received();
        }
        return n;
    }

    /** Tuples received by all sinks during the measured window. */
    static long receivedMeasured() {
        long n = 0;
        for (SinkMeter s : SINKS) {
            n += s.measured();
        }
        return n;
    }

    /** Tuples all sources are behind their schedules (the external queue). */
    static long backlog() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.pending();
        }
        return n;
    }

    /** One source instance's progress: its schedule, what it emitted, its backlog. */
    static final class SourceMeter {
        private final Offered offered;
        private volatile long startNs;
        private volatile boolean finished;
        private final AtomicLong emitted = new AtomicLong();
        private final AtomicLong measured = new AtomicLong();

        SourceMeter(Offered offered) {
            this.offered = offered;
        }

        void start(long nowNs) {
            startNs = nowNs;
        }

        /** Publishes the counts (single writer: the source's thread). */
        void progress(long emittedSoFar, long measuredSoFar) {
            emitted.lazySet(emittedSoFar);
            measured.lazySet(measuredSoFar);
        }

        void finish() {
            finished = true;
        }

        long emitted() {
            return emitted.get();
        }

        long measured() {
            return measured.get();
        }

        /**
         * Tuples due but not yet emitted (≥ 0): the source's backlog, FLIP-33's
         * {@code pendingRecords}. 0 before the start, after the end, and without a rate limit.
         */
        long pending() {
            long start = startNs;
            if (start == 0 || finished || offered.isUnlimited()) {
                return 0;
            }
            return Math.max(0, offered.due(System.nanoTime() - start) - emitted.get());
        }
    }

    /** One sink instance's counts. */
    static final class SinkMeter {
        private final AtomicLong received = new AtomicLong();
        private final AtomicLong measured = new AtomicLong();

        /** Publishes the counts (single writer: the sink's thread). */
        void progress(long receivedSoFar, long measuredSoFar) {
            received.lazySet(receivedSoFar);
            measured.lazySet(measuredSoFar);
        }

        long received() {
            return received.get();
        }

        long measured() {
            return measured.get();
        }
    }
}
