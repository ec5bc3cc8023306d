package moirai.jobs;

/**
 * The rate a source offers over time, ported from moirai's {@code Offered}
 * ({@code crates/engine/src/source.rs}): unlimited, constant, or a linear ramp from one rate to
 * another over a length of time (then staying at the second). Tuple {@code k} is intended at the
 * moment the cumulative rate reaches {@code k}.
 */
public final class Offered implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    /** Tuples/s at the start; 0 with {@code to == 0} = unlimited. */
    public final double from;
    /** Tuples/s at the end of the ramp and after (equal to {@code from} without a ramp). */
    public final double to;
    /** Length of the ramp, s (0 = constant rate). */
    public final double overS;

    private Offered(double from, double to, double overS) {
        this.from = from;
        this.to = to;
        this.overS = overS;
    }

    /** As fast as the job takes tuples. */
    public static Offered unlimited() {
        return new Offered(0, 0, 0);
    }

    /** {@code rate} tuples/s ({@code rate > 0}). */
    public static Offered constant(double rate) {
        return new Offered(rate, rate, 0);
    }

    /** From {@code from} to {@code to} tuples/s linearly over {@code overS} seconds. */
    public static Offered ramp(double from, double to, double overS) {
        return new Offered(from, to, overS);
    }

    /** Whether there is no rate limit. */
    public boolean isUnlimited() {
        return from == 0 && to == 0;
    }

    /** The same schedule split evenly over {@code n} instances. */
    public Offered split(int n) {
        return new Offered(from / n, to / n, overS);
    }

    /** How many tuples are due {@code elapsedNs} after the start: those intended at or before it. */
    public long due(long elapsedNs) {
        if (isUnlimited()) {
            return Long.MAX_VALUE;
        }
        double t = Math.max(0, elapsedNs) / 1e9;
        double cumulative;
        if (overS == 0) {
            cumulative = from * t;
        } else if (t <= overS) {
            cumulative = from * t + (to - from) * t * t / (2.0 * overS);
        } else {
            cumulative = (from + to) * overS / 2.0 + to * (t - overS);
        }
        return (long) Math.floor(cumulative) + 1;
    }

    /** When tuple {@code k} is intended, in ns after the start. */
    public long intendedNs(long k) {
        if (isUnlimited()) {
            return 0;
        }
        double secs;
        if (overS == 0) {
            secs = k / from;
        } else {
            double onRamp = (from + to) * overS / 2.0;
            if (k <= onRamp) {
                // Solve from*t + a*t^2/2 = k with a = (to - from) / over.
                double a = (to - from) / overS;
                if (Math.abs(a) < 1e-12) {
                    secs = k / from;
                } else {
                    secs = (-from + Math.sqrt(Math.max(0.0, from * from + 2.0 * a * k))) / a;
                }
            } else {
                secs = overS + (k - onRamp) / to;
            }
        }
        return (long) (secs * 1e9);
    }
}
