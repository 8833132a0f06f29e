/* crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 instruction where
 * the CPU has it, else tables with slicing by eight, so checksumming checkpoints and trace blocks
 * costs little next to writing or reading them. */
#include "pp_common.h"

#include <pthread.h>
#include <string.h>

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        g_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define PP_HAVE_HW_CRC 1

/* SSE4.2's crc32 instruction computes exactly CRC-32C: 8 bytes per instruction, several times
 * the table's speed (checksums were a quarter of the analyzer's time). One instruction waits for
 * the previous one's result (3 cycles), so long buffers run three independent lanes of LANE
 * bytes and join them: a register r followed by LANE more bytes becomes r x^(8 LANE) mod P plus
 * the lane's own checksum from 0 (the CRC is linear), and r x^(8 LANE) is one multiplication by
 * a constant (g_lane_shift) in GF(2)[x] / P. */
enum { LANE = 1024 };
/* x^(8 LANE) = x^8192 mod P in the reflected bit order: x^0 (bit 31) multiplied by x 8192 times
 * (b = b & 1 ? b >> 1 ^ P : b >> 1). A constant, so that nothing is computed at first use;
 * tests/test_common.c checks the lanes against the tables on long buffers. */
static const uint32_t g_lane_shift = 0xE4172B16u;

/* a b mod P, reflected (bit 31 is x^0): for each term of a, add b, then b = b x. */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data,
                                                             size_t n)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (n >= 3 * LANE) {
        uint64_t b = 0, d = 0;
        for (size_t k = 0; k < LANE; k += 8) {
            uint64_t x, y, z;
            memcpy(&x, p + k, 8);
            memcpy(&y, p + LANE + k, 8);
            memcpy(&z, p + 2 * LANE + k, 8);
            c = _mm_crc32_u64(c, x);
            b = _mm_crc32_u64(b, y);
            d = _mm_crc32_u64(d, z);
        }
        uint32_t ab = gf2_mul((uint32_t)c, g_lane_shift) ^ (uint32_t)b;
        c = gf2_mul(ab, g_lane_shift) ^ (uint32_t)d;
        p += 3 * LANE;
        n -= 3 * LANE;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#else
#define PP_HAVE_HW_CRC 0
#endif

static int g_hw = -1;

static void detect(void)
{
    build_tables();
#if PP_HAVE_HW_CRC
    __builtin_cpu_init();
    g_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    g_hw = 0;
#endif
}

uint32_t pp_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&g_once, detect);
#if PP_HAVE_HW_CRC
    if (g_hw)
        return crc32c_hw(crc, data, n);
#endif
    return pp_crc32c_sw(crc, data, n);
}

uint32_t pp_crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&g_once, detect);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = g_table[7][lo & 0xff] ^ g_table[6][(lo >> 8) & 0xff] ^ g_table[5][(lo >> 16) & 0xff] ^
            g_table[4][lo >> 24] ^ g_table[3][hi & 0xff] ^ g_table[2][(hi >> 8) & 0xff] ^
            g_table[1][(hi >> 16) & 0xff] ^ g_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
    return ~c;
}
