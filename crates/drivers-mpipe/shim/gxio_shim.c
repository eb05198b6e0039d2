/*
 * Rusty's shim over libgxio for the mPIPE driver (crates/drivers-mpipe, src/sys.rs).
 *
 * Built only by the TILE-Gx cross-build. It gives Rust what it cannot declare
 * itself: gxio's structures (allocated here, opaque to Rust) and the calls gxio
 * implements as `static inline` functions in <gxio/mpipe.h> and <gxio/dma_queue.h>.
 * Everything else the driver calls in libgxio directly. The NotifRing and eDMA ring
 * hot paths (idesc and edesc layouts, head, tail, generation bit) are in Rust.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <gxio/mpipe.h>

/* A context for mPIPE instance `instance`, or NULL. */
gxio_mpipe_context_t *rusty_gxio_context_new(int instance)
{
	gxio_mpipe_context_t *ctx = calloc(1, sizeof(*ctx));

	if (ctx == NULL)
		return NULL;
	if (gxio_mpipe_init(ctx, instance) < 0) {
		free(ctx);
		return NULL;
	}
	return ctx;
}

/*
 * Open `name` with data permission; report its channel and MAC. The link object is
 * kept for the life of the process (closing it would stop the traffic).
 */
int rusty_gxio_link_open(gxio_mpipe_context_t *ctx, const char *name,
			 unsigned int *channel, uint8_t *mac)
{
	gxio_mpipe_link_t *link = calloc(1, sizeof(*link));
	char found[GXIO_MPIPE_LINK_NAME_LEN];
	uint8_t addr[6];
	int rc, i;

	if (link == NULL)
		return GXIO_ERR_NO_MEMORY;
	rc = gxio_mpipe_link_open(link, ctx, name, 0);
	if (rc < 0) {
		free(link);
		return rc;
	}
	*channel = gxio_mpipe_link_channel(link);
	memset(mac, 0, 6);
	for (i = 0; gxio_mpipe_link_enumerate_mac(i, found, addr) >= 0; i++) {
		if (strcmp(found, name) == 0) {
			memcpy(mac, addr, 6);
			break;
		}
	}
	return 0;
}

/*
 * Build and commit `count` rules. Rule i: buckets[i] and num_buckets[i], packets into
 * the smallest buffer stack this context initialized that holds them (a NULL stacks
 * argument), channel_bits[i] with bit c set for channel c (0: every channel of the
 * context's links), headroom[i].
 */
int rusty_gxio_rules_commit(gxio_mpipe_context_t *ctx, unsigned int count,
			    const unsigned int *buckets,
			    const unsigned int *num_buckets,
			    const uint32_t *channel_bits, const uint8_t *headroom)
{
	gxio_mpipe_rules_t *rules = calloc(1, sizeof(*rules));
	unsigned int r, c;
	int rc = 0;

	if (rules == NULL)
		return GXIO_ERR_NO_MEMORY;
	gxio_mpipe_rules_init(rules, ctx);
	for (r = 0; r < count && rc == 0; r++) {
		rc = gxio_mpipe_rules_begin(rules, buckets[r], num_buckets[r],
					    NULL);
		if (rc == 0)
			rc = gxio_mpipe_rules_set_headroom(rules, headroom[r]);
		for (c = 0; c < 32 && rc == 0; c++)
			if (channel_bits[r] & (1u << c))
				rc = gxio_mpipe_rules_add_channel(rules, c);
	}
	if (rc == 0)
		rc = gxio_mpipe_rules_commit(rules);
	free(rules);
	return rc;
}

/* gxio_mpipe_push_buffer (static inline). */
void rusty_gxio_push_buffer(gxio_mpipe_context_t *ctx, unsigned int stack,
			    void *va)
{
	gxio_mpipe_push_buffer(ctx, stack, va);
}

/* gxio_mpipe_credit (static inline); -1 for no ring or no bucket. */
void rusty_gxio_credit(gxio_mpipe_context_t *ctx, int ring, int bucket,
		       unsigned int count)
{
	gxio_mpipe_credit(ctx, ring, bucket, count);
}

/*
 * An equeue over `mem` (gxio_mpipe_equeue_init). Rust writes the edescs; the
 * equeue serves for the completion count and the flush below.
 */
gxio_mpipe_equeue_t *rusty_gxio_equeue_new(gxio_mpipe_context_t *ctx,
					   unsigned int ering,
					   unsigned int channel, void *mem,
					   unsigned int mem_size)
{
	gxio_mpipe_equeue_t *eq = calloc(1, sizeof(*eq));

	if (eq == NULL)
		return NULL;
	if (gxio_mpipe_equeue_init(eq, ctx, ering, channel, mem, mem_size,
				   0) < 0) {
		free(eq);
		return NULL;
	}
	return eq;
}

/* Edescs completed since init, widened to 64 bits as gxio keeps the count. */
uint64_t rusty_gxio_equeue_completed(gxio_mpipe_equeue_t *eq)
{
	__gxio_dma_queue_update_credits(&eq->dma_queue);
	return eq->dma_queue.hw_complete_count;
}

/* gxio_mpipe_equeue_flush (static inline). */
void rusty_gxio_equeue_flush(gxio_mpipe_equeue_t *eq)
{
	gxio_mpipe_equeue_flush(eq);
}

/*
 * `len` bytes of hugepage memory aligned to `align` (at most the huge page size),
 * never freed: the mPIPE may write it until the process exits.
 */
void *rusty_gxio_hugepage_alloc(size_t len, size_t align)
{
	void *p;

	(void)align; /* huge pages are aligned beyond what the driver asks */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}
