//! Hints to the code generator that change nothing a program can observe.

/// `r` back, unchanged, through a value the optimiser cannot see into.
///
/// For the engine's receive loop. Its body is large and inlined, and LLVM hoists the
/// addresses of the engine fields it uses out of the loop and, short of registers,
/// spills them to the stack: an address computed and stored for each, about 30
/// instructions before the first frame, which a turn of one frame pays in full.
/// Taking the engine through `opaque` each iteration makes its address new to the
/// optimiser there, so field addresses are formed where they are used (mostly inside
/// an addressing mode, for free): 2,181 -> 2,148 instructions per request at one
/// connection, 1,990 -> 1,985 at 100 (`scripts/callgrind-rr.sh`). Unlike
/// `std::hint::black_box` (−28 / −4), nothing goes through memory: the pointer stays
/// in its register. The flush loop has the same hoisting, but there it cost 8 a
/// request at 100 connections for 9 at one.
#[inline(always)]
#[allow(unsafe_code)]
// The assembly does not dereference the pointer it is given: `nomem` is true.
#[allow(clippy::pointers_in_nomem_asm_block)]
pub(crate) fn opaque<T>(r: &mut T) -> &mut T {
    let p: *mut T = r;
    #[cfg(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)))]
    // SAFETY: the assembly is empty: the register holding `p` comes back as it went in.
    // It touches no memory and no stack and keeps the flags (as its options declare).
    let p = unsafe {
        let mut p = p;
        core::arch::asm!("/* {0} */", inout(reg) p, options(nomem, nostack, preserves_flags));
        p
    };
    // SAFETY: `p` is `r`'s address unchanged, so it is valid and aligned, and the
    // returned borrow takes over `r`'s, which the caller cannot use while it lives.
    unsafe { &mut *p }
}
