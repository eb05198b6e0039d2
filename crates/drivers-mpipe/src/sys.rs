//! libgxio on a TILE-Gx: the `extern "C"` declarations of the gxio calls the seam
//! needs, and [`Gxio`] over them.
//!
//! The declarations sit in an inline module under `#[cfg(target_arch = "tilegx")]`, so
//! every build parses them (they stay valid Rust) and none compiles them: no Rust
//! toolchain targets TILE-Gx today. gxio's structures (`gxio_mpipe_context_t`,
//! `gxio_mpipe_link_t`, `gxio_mpipe_rules_t`, the equeue) are opaque here: the C shim
//! `shim/gxio_shim.c`, built by the TILE-Gx cross-build, allocates them and wraps the
//! `static inline` calls (`gxio_mpipe_push_buffer`, `gxio_mpipe_credit`,
//! `gxio_mpipe_equeue_flush`, the eDMA completion count), so the Rust side needs no
//! structure layout but the idesc's and edesc's (`crate::desc`). Memory comes from
//! hugepages; an mPIPE address is the virtual address.

use std::sync::Arc;

use crate::gxio::Gxio;
use crate::MpipeError;

/// The mPIPE context for `link`'s instance.
#[cfg(not(target_arch = "tilegx"))]
pub(crate) fn context_for(link: &str) -> Result<Arc<dyn Gxio>, MpipeError> {
    let _ = link;
    Err(MpipeError::NotTileGx)
}

/// The mPIPE context for `link`'s instance (`gxio_mpipe_link_instance`,
/// `gxio_mpipe_init`).
#[cfg(target_arch = "tilegx")]
pub(crate) fn context_for(link: &str) -> Result<Arc<dyn Gxio>, MpipeError> {
    Ok(Arc::new(tilegx::LibGxio::open(link)?))
}

#[cfg(target_arch = "tilegx")]
#[allow(unsafe_code)]
mod tilegx {
    use std::ffi::{c_char, c_int, c_uint, c_void, CString};
    use std::ptr::NonNull;
    use std::sync::{Arc, Mutex};

    use crate::gxio::{BucketMode, BufferSize, Gxio, GxioError, Link, Rule};
    use crate::mem::Region;

    /// Opaque gxio objects, allocated by the shim.
    #[repr(C)]
    pub(super) struct Context {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub(super) struct Equeue {
        _private: [u8; 0],
    }

    extern "C" {
        // libgxio (gxio/mpipe.h), called directly.
        fn gxio_mpipe_link_instance(link_name: *const c_char) -> c_int;
        fn gxio_mpipe_alloc_buffer_stacks(
            ctx: *mut Context,
            count: c_uint,
            first: c_uint,
            flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_calc_buffer_stack_bytes(buffers: u64) -> usize;
        fn gxio_mpipe_init_buffer_stack(
            ctx: *mut Context,
            stack: c_uint,
            buffer_size_enum: c_uint,
            mem: *mut c_void,
            mem_size: usize,
            mem_flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_register_page(
            ctx: *mut Context,
            stack: c_uint,
            page: *mut c_void,
            page_size: usize,
            page_flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_alloc_notif_rings(
            ctx: *mut Context,
            count: c_uint,
            first: c_uint,
            flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_init_notif_ring(
            ctx: *mut Context,
            ring: c_uint,
            mem: *mut c_void,
            mem_size: usize,
            mem_flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_alloc_notif_groups(
            ctx: *mut Context,
            count: c_uint,
            first: c_uint,
            flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_alloc_buckets(
            ctx: *mut Context,
            count: c_uint,
            first: c_uint,
            flags: c_uint,
        ) -> c_int;
        fn gxio_mpipe_init_notif_group_and_buckets(
            ctx: *mut Context,
            group: c_uint,
            ring: c_uint,
            num_rings: c_uint,
            bucket: c_uint,
            num_buckets: c_uint,
            mode: c_uint,
        ) -> c_int;
        fn gxio_mpipe_alloc_edma_rings(
            ctx: *mut Context,
            count: c_uint,
            first: c_uint,
            flags: c_uint,
        ) -> c_int;

        // The shim (shim/gxio_shim.c): gxio objects and `static inline` calls.
        fn rusty_gxio_context_new(instance: c_int) -> *mut Context;
        fn rusty_gxio_link_open(
            ctx: *mut Context,
            link_name: *const c_char,
            channel: *mut c_uint,
            mac: *mut u8,
        ) -> c_int;
        fn rusty_gxio_rules_commit(
            ctx: *mut Context,
            count: c_uint,
            buckets: *const c_uint,
            num_buckets: *const c_uint,
            channel_bits: *const u32,
            headroom: *const u8,
        ) -> c_int;
        fn rusty_gxio_push_buffer(ctx: *mut Context, stack: c_uint, va: *mut c_void);
        fn rusty_gxio_credit(ctx: *mut Context, ring: c_int, bucket: c_int, count: c_uint);
        fn rusty_gxio_equeue_new(
            ctx: *mut Context,
            ering: c_uint,
            channel: c_uint,
            mem: *mut c_void,
            mem_size: c_uint,
        ) -> *mut Equeue;
        fn rusty_gxio_equeue_completed(eq: *mut Equeue) -> u64;
        fn rusty_gxio_equeue_flush(eq: *mut Equeue);
        fn rusty_gxio_hugepage_alloc(len: usize, align: usize) -> *mut c_void;
    }

    /// libgxio on one mPIPE instance.
    pub(super) struct LibGxio {
        ctx: NonNull<Context>,
        instance: c_int,
        equeues: Mutex<Vec<(u32, NonNull<Equeue>)>>,
    }

    // SAFETY: the context is used only through gxio calls that are safe from any tile
    // (resource calls go to the hypervisor; hot-path calls are single MMIO accesses).
    unsafe impl Send for LibGxio {}
    // SAFETY: as above.
    unsafe impl Sync for LibGxio {}

    fn check(call: &'static str, rc: c_int) -> Result<c_int, GxioError> {
        if rc < 0 {
            Err(GxioError::new(call, rc, "libgxio refused"))
        } else {
            Ok(rc)
        }
    }

    impl LibGxio {
        pub(super) fn open(link: &str) -> Result<LibGxio, GxioError> {
            let name = CString::new(link)
                .map_err(|_| GxioError::new("gxio_mpipe_link_instance", 0, "a NUL in the name"))?;
            // SAFETY: a valid C string.
            let instance = check("gxio_mpipe_link_instance", unsafe {
                gxio_mpipe_link_instance(name.as_ptr())
            })?;
            // SAFETY: plain call; a null return is an error.
            let ctx = NonNull::new(unsafe { rusty_gxio_context_new(instance) })
                .ok_or_else(|| GxioError::new("gxio_mpipe_init", -1, "no context"))?;
            Ok(LibGxio {
                ctx,
                instance,
                equeues: Mutex::new(Vec::new()),
            })
        }

        fn equeue(&self, ering: u32) -> Option<NonNull<Equeue>> {
            let q = self.equeues.lock().unwrap_or_else(|p| p.into_inner());
            q.iter().find(|(e, _)| *e == ering).map(|(_, p)| *p)
        }
    }

    fn ptr(r: &Region) -> *mut c_void {
        r.va(0) as usize as *mut c_void
    }

    impl Gxio for LibGxio {
        fn name(&self) -> String {
            format!("mpipe{}", self.instance)
        }

        fn alloc_memory(&self, len: usize, align: usize) -> Result<Region, GxioError> {
            // SAFETY: plain call; the shim maps hugepages (never freed: the mPIPE may
            // write them until the process exits).
            let p = unsafe { rusty_gxio_hugepage_alloc(len, align) };
            let p = NonNull::new(p.cast::<u8>())
                .ok_or_else(|| GxioError::new("mmap", -1, "no hugepages"))?;
            // SAFETY: the shim mapped `len` bytes at `p`, and the mPIPE uses VAs.
            Ok(unsafe { Region::mapped(p, len, p.as_ptr() as u64, Arc::new(())) })
        }

        fn link_open(&self, name: &str) -> Result<Link, GxioError> {
            let c = CString::new(name)
                .map_err(|_| GxioError::new("gxio_mpipe_link_open", 0, "a NUL in the name"))?;
            let (mut channel, mut mac) = (0, [0u8; 6]);
            // SAFETY: valid pointers for the call's duration.
            check("gxio_mpipe_link_open", unsafe {
                rusty_gxio_link_open(
                    self.ctx.as_ptr(),
                    c.as_ptr(),
                    &mut channel,
                    mac.as_mut_ptr(),
                )
            })?;
            Ok(Link {
                name: name.to_string(),
                channel,
                mac,
            })
        }

        fn alloc_buffer_stacks(&self, count: u32) -> Result<u32, GxioError> {
            // SAFETY: plain call on a live context.
            let rc = unsafe { gxio_mpipe_alloc_buffer_stacks(self.ctx.as_ptr(), count, 0, 0) };
            check("gxio_mpipe_alloc_buffer_stacks", rc).map(|i| i as u32)
        }

        fn calc_buffer_stack_bytes(&self, buffers: usize) -> usize {
            // SAFETY: pure function.
            unsafe { gxio_mpipe_calc_buffer_stack_bytes(buffers as u64) }
        }

        fn init_buffer_stack(
            &self,
            stack: u32,
            size: BufferSize,
            mem: &Region,
        ) -> Result<(), GxioError> {
            // SAFETY: `mem` is mapped and stays so (hugepages are never freed).
            let rc = unsafe {
                gxio_mpipe_init_buffer_stack(
                    self.ctx.as_ptr(),
                    stack,
                    size as c_uint,
                    ptr(mem),
                    mem.len(),
                    0,
                )
            };
            check("gxio_mpipe_init_buffer_stack", rc).map(drop)
        }

        fn register_page(&self, stack: u32, page: &Region) -> Result<(), GxioError> {
            // SAFETY: as above.
            let rc = unsafe {
                gxio_mpipe_register_page(self.ctx.as_ptr(), stack, ptr(page), page.len(), 0)
            };
            check("gxio_mpipe_register_page", rc).map(drop)
        }

        fn push_buffer(&self, stack: u32, va: u64) {
            // SAFETY: one MMIO write on a live context.
            unsafe { rusty_gxio_push_buffer(self.ctx.as_ptr(), stack, va as usize as *mut c_void) }
        }

        fn alloc_notif_rings(&self, count: u32) -> Result<u32, GxioError> {
            // SAFETY: plain call on a live context.
            let rc = unsafe { gxio_mpipe_alloc_notif_rings(self.ctx.as_ptr(), count, 0, 0) };
            check("gxio_mpipe_alloc_notif_rings", rc).map(|i| i as u32)
        }

        fn init_notif_ring(&self, ring: u32, mem: &Region) -> Result<(), GxioError> {
            // SAFETY: `mem` is mapped and stays so.
            let rc = unsafe {
                gxio_mpipe_init_notif_ring(self.ctx.as_ptr(), ring, ptr(mem), mem.len(), 0)
            };
            check("gxio_mpipe_init_notif_ring", rc).map(drop)
        }

        fn alloc_notif_groups(&self, count: u32) -> Result<u32, GxioError> {
            // SAFETY: plain call on a live context.
            let rc = unsafe { gxio_mpipe_alloc_notif_groups(self.ctx.as_ptr(), count, 0, 0) };
            check("gxio_mpipe_alloc_notif_groups", rc).map(|i| i as u32)
        }

        fn alloc_buckets(&self, count: u32) -> Result<u32, GxioError> {
            // SAFETY: plain call on a live context.
            let rc = unsafe { gxio_mpipe_alloc_buckets(self.ctx.as_ptr(), count, 0, 0) };
            check("gxio_mpipe_alloc_buckets", rc).map(|i| i as u32)
        }

        fn init_notif_group_and_buckets(
            &self,
            group: u32,
            ring: u32,
            num_rings: u32,
            bucket: u32,
            num_buckets: u32,
            mode: BucketMode,
        ) -> Result<(), GxioError> {
            // The MPIPE_LBL_INIT_DAT_BSTS_TBL__MODE_VAL_* codes (arch/mpipe.h).
            let mode = match mode {
                BucketMode::DynamicFlowAffinity => 0,
                BucketMode::StaticFlowAffinity => 1,
                BucketMode::RoundRobin => 2,
                BucketMode::StickyFlowLocality => 3,
            };
            // SAFETY: plain call on a live context.
            let rc = unsafe {
                gxio_mpipe_init_notif_group_and_buckets(
                    self.ctx.as_ptr(),
                    group,
                    ring,
                    num_rings,
                    bucket,
                    num_buckets,
                    mode,
                )
            };
            check("gxio_mpipe_init_notif_group_and_buckets", rc).map(drop)
        }

        fn commit_rules(&self, rules: &[Rule]) -> Result<(), GxioError> {
            let buckets: Vec<c_uint> = rules.iter().map(|r| r.bucket).collect();
            let num: Vec<c_uint> = rules.iter().map(|r| r.num_buckets).collect();
            // Each rule's stacks are all the context initialized: the shim passes NULL
            // (the smallest initialized stack that holds the packet).
            let channels: Vec<u32> = rules
                .iter()
                .map(|r| r.channels.iter().fold(0u32, |m, &c| m | 1 << c))
                .collect();
            let headroom: Vec<u8> = rules.iter().map(|r| r.headroom).collect();
            // SAFETY: every array holds `rules.len()` entries.
            let rc = unsafe {
                rusty_gxio_rules_commit(
                    self.ctx.as_ptr(),
                    rules.len() as c_uint,
                    buckets.as_ptr(),
                    num.as_ptr(),
                    channels.as_ptr(),
                    headroom.as_ptr(),
                )
            };
            check("gxio_mpipe_rules_commit", rc).map(drop)
        }

        fn credit(&self, ring: Option<u32>, bucket: Option<u32>, count: u32) {
            let r = ring.map_or(-1, |r| r as c_int);
            let b = bucket.map_or(-1, |b| b as c_int);
            // SAFETY: one MMIO write on a live context.
            unsafe { rusty_gxio_credit(self.ctx.as_ptr(), r, b, count) }
        }

        fn alloc_edma_rings(&self, count: u32) -> Result<u32, GxioError> {
            // SAFETY: plain call on a live context.
            let rc = unsafe { gxio_mpipe_alloc_edma_rings(self.ctx.as_ptr(), count, 0, 0) };
            check("gxio_mpipe_alloc_edma_rings", rc).map(|i| i as u32)
        }

        fn init_edma_ring(&self, ering: u32, channel: u32, mem: &Region) -> Result<(), GxioError> {
            // SAFETY: `mem` is mapped and stays so; the shim keeps the equeue.
            let eq = unsafe {
                rusty_gxio_equeue_new(
                    self.ctx.as_ptr(),
                    ering,
                    channel,
                    ptr(mem),
                    mem.len() as c_uint,
                )
            };
            let eq = NonNull::new(eq)
                .ok_or_else(|| GxioError::new("gxio_mpipe_equeue_init", -1, "refused"))?;
            self.equeues
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((ering, eq));
            Ok(())
        }

        fn edma_completed(&self, ering: u32) -> u64 {
            match self.equeue(ering) {
                // SAFETY: a live equeue of this context.
                Some(eq) => unsafe { rusty_gxio_equeue_completed(eq.as_ptr()) },
                None => 0,
            }
        }

        fn edma_post(&self, ering: u32) {
            if let Some(eq) = self.equeue(ering) {
                // SAFETY: a live equeue of this context.
                unsafe { rusty_gxio_equeue_flush(eq.as_ptr()) }
            }
        }
    }
}
