package moirai.jobs;

import java.util.ArrayList;
import java.util.List;

/**
 * A seeded Linear Road traffic generator, ported from moirai's
 * {@code crates/workloads/src/linear_road/generator.rs} (same model, same draws in the same order
 * from the same random number generator): cars enter each expressway at a rate ramping from 0.5×
 * to 1.5× the mean over the simulated run, report on the entrance ramp, every 30 s while driving
 * (speed following their segment's density, a few bottleneck segments), and once on the exit
 * ramp; about every {@code accidentIntervalS} a car stops and the next to reach it stops too, for
 * 10–20 minutes. Reports come in time order; {@link #next()} returns null after the last second.
 */
public final class LrGenerator {
    public static final int SEGMENTS = 100;
    public static final int SEGMENT_FT = 5280;
    public static final int ENTRY_LANE = 0;
    public static final int EXIT_LANE = 4;
    public static final int REPORT_INTERVAL_S = 30;

    private static final double FREE_SPEED = 70.0;
    private static final int MIN_SPEED = 10;
    private static final int TOP_SPEED = 80;
    private static final int RAMP_SPEED = 10;
    private static final double JAM_CARS = 120.0;
    private static final int BOTTLENECKS = 3;
    private static final int FT_PER_MPH = 44;
    private static final int NONE = -1;

    /** Parameters of the generated traffic (moirai's {@code GeneratorConfig}). */
    public static final class Config implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        public int xways = 1;
        public int durationS = 10_800;
        public long seed = 0;
        public double carsPerSecond = 20.0;
        public int accidentIntervalS = 1200;
        public int accidentMinS = 600;
        public int accidentMaxS = 1200;

        public Config copy() {
            Config c = new Config();
            c.xways = xways;
            c.durationS = durationS;
            c.seed = seed;
            c.carsPerSecond = carsPerSecond;
            c.accidentIntervalS = accidentIntervalS;
            c.accidentMinS = accidentMinS;
            c.accidentMaxS = accidentMaxS;
            return c;
        }

        /** Checks the parameters; null if fine, else what to change. */
        public String validate() {
            if (xways < 1) {
                return "--xways must be at least 1";
            }
            if (!(Double.isFinite(carsPerSecond) && carsPerSecond > 0 && carsPerSecond <= 10_000)) {
                return "--cars-per-second must be in (0, 10000], not " + carsPerSecond;
            }
            if (durationS < 1) {
                return "--traffic must be at least 1s of simulated traffic";
            }
            double cars = carsPerSecond * 2.25 * durationS * xways;
            if (cars >= 4_294_967_295.0) {
                return String.format("--traffic/--cars-per-second/--xways would make about %.0f cars, more than "
                        + "32-bit car ids allow; shorten --traffic", cars);
            }
            return null;
        }
    }

    private static final class Car {
        public int id;
        public int xway;
        public int dir;
        public int lane;
        public int pos;
        public int speed;
        public int exitSeg;
        public int frozenUntil = NONE;
        public boolean onRoad;

        public int seg() {
            return pos / SEGMENT_FT;
        }
    }

    private record Waiting(int xway, int dir, int lane, int pos, int until) {}

    private final Config config;
    private final WyRand rng;
    private int time;
    private final List<Car> cars = new ArrayList<>();
    private final IntStack free = new IntStack();
    private final IntStack[] wheel = new IntStack[REPORT_INTERVAL_S];
    private int nextId;
    /** [xway][dir][seg]: cars at their last report. */
    private final int[][][] occupancy;
    /** [xway][dir][seg]: cars at which a segment stands still. */
    private final double[][][] jam;
    private final double[] arrivals;
    private final int[] nextAccident;
    private final List<Waiting> waiting = new ArrayList<>();
    private final List<LrRecords.PositionReport> out = new ArrayList<>();
    private int nextOut;

    /** A generator for {@code config} whose car ids start at {@code firstId}. */
    public LrGenerator(Config config, int firstId) {
        String problem = config.validate();
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        this.config = config;
        this.nextId = firstId;
        this.rng = new WyRand(config.seed);
        int x = config.xways;
        jam = new double[x][2][SEGMENTS];
        occupancy = new int[x][2][SEGMENTS];
        for (double[][] directions : jam) {
            for (double[] segments : directions) {
                java.util.Arrays.fill(segments, JAM_CARS);
                for (int b = 0; b < BOTTLENECKS; b++) {
                    segments[(int) rng.inclusive64(0, SEGMENTS - 1)] = JAM_CARS / 3.0;
                }
            }
        }
        nextAccident = new int[x];
        for (int i = 0; i < x; i++) {
            nextAccident[i] = config.accidentIntervalS == 0
                    ? Integer.MAX_VALUE
                    : 4 * REPORT_INTERVAL_S + nextAccidentGap() / 2;
        }
        arrivals = new double[x];
        for (int i = 0; i < wheel.length; i++) {
            wheel[i] = new IntStack();
        }
    }

    /** The id the next new car would get. */
    public int nextId() {
        return nextId;
    }

    private int nextAccidentGap() {
        return (int) (config.accidentIntervalS * (0.5 + rng.nextDouble()));
    }

    private int arrivals(int xway, int t) {
        double ramp = 0.5 + (double) t / Math.max(config.durationS, 1);
        double due = arrivals[xway] + config.carsPerSecond * ramp * (0.5 + rng.nextDouble());
        double n = Math.floor(due);
        arrivals[xway] = due - n;
        return (int) n;
    }

    private int newCar(int xway) {
        Car car = new Car();
        car.dir = (int) rng.inclusive32(0, 1);
        int entry;
        if (car.dir == 0) {
            entry = (int) rng.inclusive32(0, SEGMENTS - 3);
            car.exitSeg = (int) rng.inclusive32(entry + 2, SEGMENTS - 1);
        } else {
            entry = (int) rng.inclusive32(2, SEGMENTS - 1);
            car.exitSeg = (int) rng.inclusive32(0, entry - 2);
        }
        car.pos = entry * SEGMENT_FT + (car.dir == 0 ? 0 : SEGMENT_FT - 1);
        car.id = nextId++;
        car.xway = xway;
        car.lane = ENTRY_LANE;
        car.speed = RAMP_SPEED;
        if (free.size() > 0) {
            int i = free.pop();
            cars.set(i, car);
            return i;
        }
        cars.add(car);
        return cars.size() - 1;
    }

    /** Rust's {@code f64::round}: halves away from zero. */
    private static long roundHalfAway(double v) {
        return (long) (v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5));
    }

    private int speed(int carsThere, double jamCars) {
        double freeFlow = FREE_SPEED * (1.0 - carsThere / jamCars);
        long s = roundHalfAway(freeFlow) + rng.inclusive32(-5, 5);
        return (int) Math.max(MIN_SPEED, Math.min(TOP_SPEED, s));
    }

    private void second(int t) {
        int slot = t % REPORT_INTERVAL_S;
        IntStack due = wheel[slot];
        wheel[slot] = new IntStack();
        for (int xway = 0; xway < config.xways; xway++) {
            int n = arrivals(xway, t);
            for (int k = 0; k < n; k++) {
                due.push(newCar(xway));
            }
        }
        waiting.removeIf(w -> w.until <= t);
        IntStack stays = wheel[slot];
        for (int k = 0; k < due.size(); k++) {
            int i = due.get(k);
            if (step(i, t)) {
                stays.push(i);
            } else {
                cars.set(i, null);
                free.push(i);
            }
        }
    }

    private boolean step(int i, int t) {
        Car car = cars.get(i);
        int x = car.xway;
        int d = car.dir;
        boolean leaves = false;
        if (!car.onRoad) {
            car.onRoad = true;
            occupancy[x][d][car.seg()]++;
        } else if (car.frozenUntil != NONE && t < car.frozenUntil) {
            car.speed = 0;
        } else {
            if (car.frozenUntil != NONE) {
                car.frozenUntil = NONE;
                int seg = car.seg();
                car.speed = speed(occupancy[x][d][seg], jam[x][d][seg]);
            }
            int oldSeg = car.seg();
            int moved = car.speed * FT_PER_MPH;
            int exitStart = car.exitSeg * SEGMENT_FT;
            int exitEnd = exitStart + SEGMENT_FT - 1;
            int unclamped;
            boolean exiting;
            if (car.dir == 0) {
                unclamped = car.pos + moved;
                exiting = unclamped >= exitStart;
            } else {
                unclamped = Math.max(0, car.pos - moved);
                exiting = unclamped <= exitEnd;
            }
            // A car reaching the spot where an accident's first car stands becomes its second.
            int crash = -1;
            for (int w = 0; w < waiting.size(); w++) {
                Waiting wt = waiting.get(w);
                boolean reaches;
                boolean beforeExit;
                if (car.dir == 0) {
                    reaches = car.pos < wt.pos && wt.pos <= unclamped;
                    beforeExit = wt.pos < exitStart;
                } else {
                    reaches = unclamped <= wt.pos && wt.pos < car.pos;
                    beforeExit = wt.pos > exitEnd;
                }
                if (wt.xway == car.xway && wt.dir == car.dir && reaches && beforeExit) {
                    crash = w;
                    break;
                }
            }
            if (crash >= 0) {
                Waiting wt = waiting.remove(crash);
                car.pos = wt.pos;
                car.lane = wt.lane;
                car.speed = 0;
                car.frozenUntil = wt.until;
            } else if (exiting) {
                car.pos = Math.max(exitStart, Math.min(exitEnd, unclamped));
                car.lane = EXIT_LANE;
                leaves = true;
            } else {
                car.pos = unclamped;
                if (car.lane == ENTRY_LANE) {
                    car.lane = 1 + (int) rng.inclusive32(0, 2);
                }
            }
            int seg = car.seg();
            occupancy[x][d][oldSeg]--;
            occupancy[x][d][seg]++;
            if (car.frozenUntil == NONE) {
                car.speed = speed(occupancy[x][d][seg], jam[x][d][seg]);
                maybeCrash(car, t);
            }
        }
        LrRecords.PositionReport p = new LrRecords.PositionReport();
        p.time = t;
        p.car = car.id;
        p.speed = car.speed;
        p.xway = car.xway;
        p.lane = car.lane;
        p.dir = car.dir;
        p.seg = car.seg();
        p.pos = car.pos;
        out.add(p);
        if (leaves) {
            occupancy[x][d][car.seg()]--;
        }
        return !leaves;
    }

    private void maybeCrash(Car car, int t) {
        int x = car.xway;
        boolean farFromExit = Math.abs(car.seg() - car.exitSeg) >= 3;
        if (t < nextAccident[x] || car.lane == ENTRY_LANE || car.lane == EXIT_LANE || !farFromExit) {
            return;
        }
        int until = t + config.accidentMinS + (int) rng.inclusive32(0, config.accidentMaxS - config.accidentMinS);
        car.speed = 0;
        car.frozenUntil = until;
        waiting.add(new Waiting(car.xway, car.dir, car.lane, car.pos, until));
        nextAccident[x] = t + nextAccidentGap();
    }

    /** The next report in time order, or null when the simulated time is over. */
    public LrRecords.PositionReport next() {
        while (nextOut == out.size()) {
            if (time >= config.durationS) {
                return null;
            }
            out.clear();
            nextOut = 0;
            second(time);
            time++;
        }
        return out.get(nextOut++);
    }

    /** A growable stack of ints. */
    private static final class IntStack {
        private int[] items = new int[16];
        private int size;

        public void push(int v) {
            if (size == items.length) {
                items = java.util.Arrays.copyOf(items, size * 2);
            }
            items[size++] = v;
        }

        public int pop() {
            return items[--size];
        }

        public int get(int i) {
            return items[i];
        }

        public int size() {
            return size;
        }
    }
}
