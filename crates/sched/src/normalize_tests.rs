//! Tests of the normalisers: worked examples, the all-equal case, and properties (order kept,
//! range kept, one nice step per priority ratio of 1.25).

use proptest::prelude::*;

use super::*;

const ALL: [Normalization; 3] = [Normalization::Linear, Normalization::Logarithmic, Normalization::Ratio];

#[test]
fn linear_maps_min_to_worst_and_max_to_best() {
    let p = [0.0, 10.0, 5.0];
    // The middle of [-20, 19] is -0.5, which rounds away from zero.
    assert_eq!(to_nice(&p, Normalization::Linear, NiceRange::default()), vec![19, -20, -1]);
    assert_eq!(to_weights(&p, Normalization::Linear, WeightRange::CPU_WEIGHT), vec![1, 10_000, 5001]);
    assert_eq!(to_weights(&p, Normalization::Linear, WeightRange::CPU_SHARES), vec![2, 262_144, 131_073]);
}

#[test]
fn logarithmic_spreads_orders_of_magnitude() {
    // Rates 1, 10, 100, 1000 (as in HR) get evenly spread nice values, not three at the bottom.
    let p = [0.0, 9.0, 99.0, 999.0];
    let nice = to_nice(&p, Normalization::Logarithmic, NiceRange::default());
    assert_eq!(nice, vec![19, 6, -7, -20]);
    let linear = to_nice(&p, Normalization::Linear, NiceRange::default());
    assert_eq!(linear, vec![19, 19, 15, -20]);
}

#[test]
fn ratio_is_the_nice_formula() {
    // p_max gets the best nice; p_max / 1.25^k gets best + k.
    let p: Vec<f64> = (0..5).map(|k| 100.0 / 1.25_f64.powi(k)).collect();
    assert_eq!(to_nice(&p, Normalization::Ratio, NiceRange::default()), vec![-20, -19, -18, -17, -16]);
    // A configured best nice.
    assert_eq!(to_nice(&p, Normalization::Ratio, NiceRange { best: 0, worst: 19 }), vec![0, 1, 2, 3, 4]);
    // Ratios too large for the range are clamped at the worst nice.
    assert_eq!(to_nice(&[1e9, 1.0], Normalization::Ratio, NiceRange::default()), vec![-20, 19]);
    // Non-positive priorities are shifted to start at 1: [0, 0.25] -> [1, 1.25].
    assert_eq!(to_nice(&[0.0, 0.25], Normalization::Ratio, NiceRange::default()), vec![-19, -20]);
}

#[test]
fn ratio_weights_are_proportional() {
    let w = to_weights(&[100.0, 50.0, 1.0, 0.001], Normalization::Ratio, WeightRange { min: 10, max: 1000 });
    assert_eq!(w, vec![1000, 500, 10, 10]);
}

#[test]
fn all_equal_priorities() {
    for how in [Normalization::Linear, Normalization::Logarithmic] {
        assert_eq!(to_nice(&[3.0; 4], how, NiceRange { best: -10, worst: 10 }), vec![0; 4], "{how:?}");
        assert_eq!(to_weights(&[3.0; 2], how, WeightRange { min: 100, max: 300 }), vec![200; 2], "{how:?}");
    }
    assert_eq!(to_nice(&[3.0; 4], Normalization::Ratio, NiceRange::default()), vec![-20; 4]);
    assert_eq!(to_weights(&[0.0; 3], Normalization::Ratio, WeightRange::CPU_WEIGHT), vec![10_000; 3]);
    // One operator is the all-equal case too.
    assert_eq!(to_nice(&[42.0], Normalization::Linear, NiceRange::default()), vec![-1]);
    assert_eq!(to_weights(&[f64::MIN; 3], Normalization::Ratio, WeightRange::CPU_WEIGHT), vec![10_000; 3]);
}

#[test]
fn empty_and_non_finite_inputs() {
    for how in ALL {
        assert!(to_nice(&[], how, NiceRange::default()).is_empty());
        assert!(to_weights(&[], how, WeightRange::CPU_SHARES).is_empty());
        let nice = to_nice(&[f64::NAN, 1.0, 5.0, f64::INFINITY], how, NiceRange::default());
        assert_eq!(nice[0], nice[1], "{how:?}: NaN counts as the lowest");
        assert_eq!(nice[3], nice[1], "{how:?}: infinity counts as the lowest");
        assert!(nice[2] <= nice[1]);
    }
}

#[test]
fn ranges_are_validated() {
    assert!(NiceRange::default().validate().is_ok());
    assert!(NiceRange { best: 5, worst: -5 }.validate().unwrap_err().contains("lower nice is better"));
    assert!(NiceRange { best: -21, worst: 0 }.validate().is_err());
    assert!(WeightRange::CPU_SHARES.validate(WeightRange::CPU_SHARES).is_ok());
    assert!(WeightRange { min: 1, max: 100 }.validate(WeightRange::CPU_SHARES).is_err());
    assert!(WeightRange { min: 10, max: 20_000 }.validate(WeightRange::CPU_WEIGHT).is_err());
    // Reversed ends still give in-range, order-preserving values.
    assert_eq!(to_nice(&[1.0, 2.0], Normalization::Linear, NiceRange { best: 5, worst: -5 }), vec![5, -5]);
}

fn priorities() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(
        prop_oneof![-1e6..1e6_f64, 0.0..1.0_f64, -1e300..1e300_f64, Just(0.0), Just(f64::MAX), Just(f64::MIN)],
        1..40,
    )
}

fn nice_range() -> impl Strategy<Value = NiceRange> {
    (-20..=19_i32, -20..=19_i32).prop_map(|(a, b)| NiceRange { best: a.min(b), worst: a.max(b) })
}

fn weight_range() -> impl Strategy<Value = WeightRange> {
    prop_oneof![
        Just(WeightRange::CPU_SHARES),
        Just(WeightRange::CPU_WEIGHT),
        (1..10_000_u64, 1..10_000_u64).prop_map(|(a, b)| WeightRange { min: a.min(b), max: a.max(b) }),
    ]
}

proptest! {
    #[test]
    fn nice_is_order_preserving_and_in_range(p in priorities(), range in nice_range(), how in prop::sample::select(ALL.to_vec())) {
        let nice = to_nice(&p, how, range);
        prop_assert_eq!(nice.len(), p.len());
        for i in 0..p.len() {
            prop_assert!(range.best <= nice[i] && nice[i] <= range.worst, "{} out of {:?}", nice[i], range);
            for j in 0..p.len() {
                if p[i] > p[j] {
                    prop_assert!(nice[i] <= nice[j], "p {} > {} but nice {} > {}", p[i], p[j], nice[i], nice[j]);
                }
            }
        }
    }

    #[test]
    fn weights_are_order_preserving_and_in_range(p in priorities(), range in weight_range(), how in prop::sample::select(ALL.to_vec())) {
        let w = to_weights(&p, how, range);
        prop_assert_eq!(w.len(), p.len());
        for i in 0..p.len() {
            prop_assert!(range.min <= w[i] && w[i] <= range.max, "{} out of {:?}", w[i], range);
            for j in 0..p.len() {
                if p[i] > p[j] {
                    prop_assert!(w[i] >= w[j], "p {} > {} but weight {} < {}", p[i], p[j], w[i], w[j]);
                }
            }
        }
    }

    #[test]
    fn priority_ratio_of_one_point_two_five_is_one_nice_step(p_max in 1e-3..1e9_f64, k in 0..39_i32, extra in prop::collection::vec(1e-3..1.0_f64, 0..5)) {
        // p_max, p_max / 1.25^k, and some values below p_max that must not change either's nice.
        let mut p = vec![p_max, p_max / 1.25_f64.powi(k)];
        p.extend(extra.iter().map(|f| f * p_max));
        let nice = to_nice(&p, Normalization::Ratio, NiceRange::default());
        prop_assert_eq!(nice[0], -20);
        prop_assert_eq!(nice[1], -20 + k);
    }

    #[test]
    fn ratio_weights_keep_ratios_within_rounding(p_max in 1.0..1e6_f64, f in 0.01..1.0_f64) {
        let w = to_weights(&[p_max, p_max * f], Normalization::Ratio, WeightRange::CPU_SHARES);
        prop_assert_eq!(w[0], 262_144);
        prop_assert!((w[1] as f64 - 262_144.0 * f).abs() <= 0.5 + 1e-6, "{} vs {}", w[1], 262_144.0 * f);
    }
}
