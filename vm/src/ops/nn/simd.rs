//! Loops written in plain Rust, compiled for the widest vector instructions the CPU has.

/// Defines `fn NAME(ARGS) -> RET { BODY }` whose body is compiled three times: for
/// AVX-512, for AVX2 with FMA, and for the baseline target, the first the CPU supports
/// chosen at run time (the check is a cached load). The body is plain loops that the
/// compiler vectorises for each; the choice never changes results, since Rust does not
/// contract multiplies and adds into FMAs on its own. Arguments are plain identifiers.
macro_rules! widest {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident $(<$($lt:lifetime),*>)? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?
        $body:block
    ) => {
        $(#[$meta])*
        $vis fn $name $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
                unsafe fn avx512 $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2 $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
                    // SAFETY: the CPU supports AVX-512F and VL (and so AVX2 and FMA), checked
                    // just above.
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

/// A slice of exactly `N` elements as an array (the callers slice exactly `N`): loops over
/// it have a known length, which the compiler unrolls into whole vectors.
#[inline(always)]
#[allow(clippy::expect_used)]
pub(super) fn arr<const N: usize>(s: &[f32]) -> &[f32; N] {
    s.try_into().expect("a slice of N elements")
}

/// [`arr`] for a mutable slice.
#[inline(always)]
#[allow(clippy::expect_used)]
pub(super) fn arr_mut<const N: usize>(s: &mut [f32]) -> &mut [f32; N] {
    s.try_into().expect("a slice of N elements")
}
