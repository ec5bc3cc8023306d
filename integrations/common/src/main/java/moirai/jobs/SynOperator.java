package moirai.jobs;

import java.util.function.Consumer;

/**
 * The SYN operator, engine agnostic (moirai's {@code SynOperator}): spins for its cost, maybe
 * blocks (sleeps {@code U[0, max)} with a probability per tuple, a real sleep), then emits
 * {@code floor(s)} copies of the tuple plus one more with probability {@code s − floor(s)}, drawn
 * from a generator seeded per operator and instance exactly as moirai seeds it
 * ({@code seed ^ query << 32 ^ op ^ instance << 48}; same seed, same tuples through).
 */
public final class SynOperator {
    private final Spin spin;
    private final double selectivity;
    private final double blockProbability;
    private final long blockMaxNs;
    private final WyRand rng;
    private long blackHole;

    /**
     * Operator {@code op} (from 1) of query {@code query}, instance {@code instance}, with the drawn
     * {@code params}; a blocking one sleeps as {@code config} says.
     */
    public SynOperator(SynConfig config, SynDraw.OperatorParams params, int query, int op, int instance) {
        this.spin = new Spin(params.costNs);
        this.selectivity = params.selectivity;
        this.blockProbability = params.blocking ? config.blockProbability : -1;
        this.blockMaxNs = config.blockMaxMs * 1_000_000L;
        long seed = config.seed ^ ((long) query << 32) ^ op;
        this.rng = new WyRand(seed ^ ((long) instance << 48));
    }

    /** Processes one tuple; what it emits goes to {@code out}. */
    public void process(SynTuple t, Consumer<SynTuple> out) {
        blackHole ^= spin.run(t.value);
        if (blockProbability >= 0 && rng.nextDouble() < blockProbability) {
            // Rust's Duration::mul_f64: the product in seconds, rounded down to whole ns.
            long ns = (long) (blockMaxNs / 1e9 * rng.nextDouble() * 1e9);
            try {
                Thread.sleep(ns / 1_000_000, (int) (ns % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (selectivity == 1.0) {
            out.accept(t);
            return;
        }
        double whole = Math.floor(selectivity);
        long copies = (long) whole;
        if (rng.nextDouble() < selectivity - whole) {
            copies++;
        }
        for (long c = 0; c < copies; c++) {
            out.accept(c == 0 ? t : t.copy());
        }
    }

    /** Keeps the spin loops' results observable (call when the operator closes). */
    public void close() {
        Spin.keep(blackHole);
    }
}
