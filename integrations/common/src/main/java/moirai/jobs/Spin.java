package moirai.jobs;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Simulated operator cost, ported from moirai's {@code crates/workloads/src/cost.rs}: a calibrated
 * busy loop of dependent multiply-adds, not a sleep, so that it takes CPU time the way real work
 * does. The loop is calibrated once per JVM on thread CPU time (the fastest of 7 runs of a million
 * iterations), so that a run preempted by other threads does not make the loop look slower.
 */
public final class Spin implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    /** Loop iterations per nanosecond, measured once per JVM ({@link #iterationsPerNs()}). */
    private static volatile double calibration = 0.0;

    /** Keeps the loop's result observable, so that the JIT cannot drop the loop. */
    private static volatile long blackHole;

    private final long iterations;

    /** A loop that takes about {@code ns} nanoseconds of CPU (calibrates on first use). */
    public Spin(long ns) {
        this.iterations = ns == 0 ? 0 : Math.round(ns * iterationsPerNs());
    }

    /** Loop iterations this spin runs per call (before the seed's parity is folded in). */
    public long iterations() {
        return iterations;
    }

    /** Runs the loop; the seed's lowest bit varies the count by one, as in moirai. */
    public long run(long seed) {
        if (iterations == 0) {
            return seed;
        }
        return spinIterations(iterations ^ (seed & 1));
    }

    /** One dependent multiply-add per iteration. */
    public static long spinIterations(long n) {
        long x = n;
        for (long i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    /** Keeps a value computed from loop results observable, so that the JIT cannot drop the loops. */
    public static void keep(long value) {
        blackHole ^= value;
    }

    /** Loop iterations per nanosecond on this machine; calibrates on the first call. */
    public static double iterationsPerNs() {
        double c = calibration;
        if (c > 0.0) {
            return c;
        }
        synchronized (Spin.class) {
            if (calibration == 0.0) {
                calibration = calibrate();
            }
            return calibration;
        }
    }

    private static double calibrate() {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        boolean cpuClock = threads.isCurrentThreadCpuTimeSupported();
        if (cpuClock && !threads.isThreadCpuTimeEnabled()) {
            threads.setThreadCpuTimeEnabled(true);
        }
        long n = 1_000_000;
        // The JIT compiles the loop during the first runs; these are not timed.
        for (int i = 0; i < 20; i++) {
            blackHole ^= spinIterations(n / 10);
        }
        double best = Double.MAX_VALUE;
        for (int i = 0; i < 7; i++) {
            long cpu = cpuClock ? threads.getCurrentThreadCpuTime() : 0;
            long wall = System.nanoTime();
            blackHole ^= spinIterations(n);
            long took = cpuClock ? threads.getCurrentThreadCpuTime() - cpu : 0;
            // Without a thread CPU clock (never on Linux), wall time is the fallback.
            if (took <= 0) {
                took = System.nanoTime() - wall;
            }
            best = Math.min(best, (double) took);
        }
        return n / Math.max(best, 1.0);
    }
}
