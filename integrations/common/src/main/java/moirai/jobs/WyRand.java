package moirai.jobs;

/**
 * The random number generator moirai's Rust workloads use (the {@code fastrand} 2.x crate's
 * WyRand), bit for bit: the same seed gives the same draws here as there, so that a seeded SYN
 * operator lets the same tuples through in both engines.
 */
public final class WyRand {
    private long state;

    /** A generator seeded with {@code seed} ({@code fastrand::Rng::with_seed}). */
    public WyRand(long seed) {
        this.state = seed;
    }

    /** The next 64 random bits ({@code gen_u64}). */
    public long nextU64() {
        long s = state + 0x2d358dccaa6c78a5L;
        state = s;
        long b = s ^ 0x8bb84b93962eacc9L;
        long lo = s * b;
        long hi = Math.multiplyHigh(s, b) + ((s >> 63) & b) + ((b >> 63) & s);
        return lo ^ hi;
    }

    /** The next 32 random bits, as an unsigned value in a long ({@code gen_u32}). */
    public long nextU32() {
        return nextU64() & 0xffffffffL;
    }

    /** Uniform in {@code [0, 1)} ({@code f64}). */
    public double nextDouble() {
        while (true) {
            double x = (double) (nextU64() >>> 1) * 0x1.0p-63;
            if (x < 1.0) {
                return x;
            }
        }
    }

    /** Uniform in {@code [0, n)} for {@code 0 < n <= 2^32} ({@code gen_mod_u32}, Lemire's method). */
    public long modU32(long n) {
        long r = nextU32();
        long hi = (r * n) >>> 32;
        long lo = (r * n) & 0xffffffffL;
        if (lo < n) {
            long t = ((-n) & 0xffffffffL) % n;
            while (lo < t) {
                r = nextU32();
                hi = (r * n) >>> 32;
                lo = (r * n) & 0xffffffffL;
            }
        }
        return hi;
    }

    /** Uniform in {@code [0, n)} for {@code n > 0} as an unsigned 64-bit value ({@code gen_mod_u64}). */
    public long modU64(long n) {
        long r = nextU64();
        long hi = Math.multiplyHigh(r, n) + ((r >> 63) & n) + ((n >> 63) & r);
        long lo = r * n;
        if (Long.compareUnsigned(lo, n) < 0) {
            long t = Long.remainderUnsigned(-n, n);
            while (Long.compareUnsigned(lo, t) < 0) {
                r = nextU64();
                hi = Math.multiplyHigh(r, n) + ((r >> 63) & n) + ((n >> 63) & r);
                lo = r * n;
            }
        }
        return hi;
    }

    /**
     * Uniform in {@code [low, high]} for the 8-, 16- and 32-bit types of {@code fastrand}
     * ({@code u8(..)}, {@code u32(..)}, {@code i32(..)}: 32-bit draws).
     */
    public long inclusive32(long low, long high) {
        if (low > high) {
            throw new IllegalArgumentException("empty range " + low + "..=" + high);
        }
        long len = high - low + 1;
        if (len == 1L << 32) {
            return low + nextU32();
        }
        return low + modU32(len);
    }

    /** Uniform in {@code [low, high]} for {@code usize}/{@code u64} ranges (64-bit draws). */
    public long inclusive64(long low, long high) {
        if (low > high) {
            throw new IllegalArgumentException("empty range " + low + "..=" + high);
        }
        return low + modU64(high - low + 1);
    }
}
