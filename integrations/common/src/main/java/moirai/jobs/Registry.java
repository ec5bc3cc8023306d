package moirai.jobs;

import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.HdrHistogram.Histogram;

/**
 * What the job's tasks measure, collected for the main thread. Both engines run the whole job in
 * this JVM (Flink's MiniCluster, Storm's LocalCluster) with the job's classes from the application
 * class path, so static collectors are shared by all tasks and read by the engine's {@code Run}
 * while the job runs (throughput, backlog) and after it finished (latency histograms, merged by
 * each sink when its input ends).
 */
public final class Registry {
    private Registry() {}

    /** How long the sources run, ns; set by {@link Run} before the job starts. */
    public static volatile long durationNs;
    /** Share of the run discarded as warm-up; set by {@link Run} before the job starts. */
    public static volatile double warmup;

    /** {@link System#nanoTime()} when the first source instance started; 0 = not yet. */
    private static final AtomicLong START_NS = new AtomicLong();
    /** Wall-clock time of about the same instant, ms since the epoch (0 until it is known). */
    public static volatile long startEpochMs;

    /** Every source instance's meter. */
    public static final Queue<SourceMeter> SOURCES = new ConcurrentLinkedQueue<>();
    /** Every sink instance's meter. */
    public static final Queue<SinkMeter> SINKS = new ConcurrentLinkedQueue<>();
    /** Subtasks (task threads) that opened: sources, operators and sinks. */
    public static final AtomicInteger SUBTASKS = new AtomicInteger();

    /** Processing latency of tuples that entered after the warm-up, ns; merged at sink close. */
    public static final Histogram LATENCY = new Histogram(3);
    /** End-to-end latency of the same tuples, ns. */
    public static final Histogram E2E_LATENCY = new Histogram(3);

    /** Linear Road: position reports the dispatchers passed on. */
    public static final LongAdder POSITION_REPORTS = new LongAdder();
    /** Linear Road: records the dispatchers dropped (not position reports). */
    public static final LongAdder OTHER_RECORDS = new LongAdder();
    /** Linear Road: notifications out of each toll operator, {@code [pos, cv, las]}. */
    public static final LongAdder[] LACHESIS_NOTIFICATIONS = {new LongAdder(), new LongAdder(), new LongAdder()};
    /** Linear Road: outputs whose end-to-end latency exceeded the benchmark's 5 s deadline. */
    public static final LongAdder DEADLINE_MISSES = new LongAdder();
    /** Linear Road: the largest end-to-end latency of an output, ns. */
    public static final AtomicLong MAX_E2E_NS = new AtomicLong();

    /** Marks the start of the run (the first source instance to start wins); returns the start. */
    public static long markStart(long nowNs) {
        if (START_NS.compareAndSet(0, nowNs)) {
            startEpochMs = System.currentTimeMillis();
        }
        return START_NS.get();
    }

    /** Start of the measured window, ns ({@link System#nanoTime()}); valid once started. */
    public static long windowStartNs() {
        return START_NS.get() + (long) (durationNs * warmup);
    }

    /** End of the measured window (the end of the run), ns; valid once started. */
    public static long windowEndNs() {
        return START_NS.get() + durationNs;
    }

    /** {@link System#nanoTime()} when the run started, 0 before. */
    public static long startNs() {
        return START_NS.get();
    }

    /** Adds a finished sink's histograms. */
    public static synchronized void merge(Histogram latency, Histogram e2e) {
        LATENCY.add(latency);
        E2E_LATENCY.add(e2e);
    }

    /** Copies of the merged histograms. */
    public static synchronized Histogram[] latencies() {
        return new Histogram[] {LATENCY.copy(), E2E_LATENCY.copy()};
    }

    /** Tuples emitted by all sources so far. */
    public static long emitted() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.emitted();
        }
        return n;
    }

    /** Tuples emitted by all sources during the measured window (final once the sources ended). */
    public static long emittedMeasured() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.measured();
        }
        return n;
    }

    /** Tuples received by all sinks so far. */
    public static long received() {
        long n = 0;
        for (SinkMeter s : SINKS) {
            n += s.received();
        }
        return n;
    }

    /** Tuples received by all sinks during the measured window. */
    public static long receivedMeasured() {
        long n = 0;
        for (SinkMeter s : SINKS) {
            n += s.measured();
        }
        return n;
    }

    /** Tuples all sources are behind their schedules (the external queue). */
    public static long backlog() {
        long n = 0;
        for (SourceMeter s : SOURCES) {
            n += s.pending();
        }
        return n;
    }

    /** One source instance's progress: its schedule, what it emitted, its backlog. */
    public static final class SourceMeter {
        private final Offered offered;
        private volatile long startNs;
        private volatile boolean finished;
        private final AtomicLong emitted = new AtomicLong();
        private final AtomicLong measured = new AtomicLong();

        public SourceMeter(Offered offered) {
            this.offered = offered;
        }

        public void start(long nowNs) {
            startNs = nowNs;
        }

        /** Publishes the counts (single writer: the source's thread). */
        public void progress(long emittedSoFar, long measuredSoFar) {
            emitted.lazySet(emittedSoFar);
            measured.lazySet(measuredSoFar);
        }

        public void finish() {
            finished = true;
        }

        public long emitted() {
            return emitted.get();
        }

        public long measured() {
            return measured.get();
        }

        /**
         * Tuples due but not yet emitted (≥ 0): the source's backlog, FLIP-33's
         * {@code pendingRecords}. 0 before the start, after the end, and without a rate limit.
         */
        public long pending() {
            long start = startNs;
            if (start == 0 || finished || offered.isUnlimited()) {
                return 0;
            }
            return Math.max(0, offered.due(System.nanoTime() - start) - emitted.get());
        }
    }

    /** One sink instance's counts. */
    public static final class SinkMeter {
        private final AtomicLong received = new AtomicLong();
        private final AtomicLong measured = new AtomicLong();

        /** Publishes the counts (single writer: the sink's thread). */
        public void progress(long receivedSoFar, long measuredSoFar) {
            received.lazySet(receivedSoFar);
            measured.lazySet(measuredSoFar);
        }

        public long received() {
            return received.get();
        }

        public long measured() {
            return measured.get();
        }
    }
}
