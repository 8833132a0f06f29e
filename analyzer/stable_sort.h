/* stable_sort.h: a stable merge sort with its comparison inlined, for the analysis' hot sorts
 * (metrics.c's per-step ops and transfers, gpu.c's join window), where qsort's callback cost a
 * tenth of the time or more. */
#ifndef PP_STABLE_SORT_H
#define PP_STABLE_SORT_H

#include <stddef.h>
#include <string.h>

/* A stable merge sort of n T's by LESS(const T *, const T *), the comparison inlined. Runs of
 * 16 by insertion, then merges; an already ordered pair of runs costs one comparison, and a
 * step's ranges arrive nearly ordered. tmp holds n elements. */
#define DEFINE_STABLE_SORT(name, T, LESS)                                                      \
    static void name(T *v, size_t n, T *tmp)                                                   \
    {                                                                                          \
        enum { RUN = 16 };                                                                     \
        for (size_t lo = 0; lo < n; lo += RUN) {                                               \
            size_t hi = lo + RUN < n ? lo + RUN : n;                                           \
            for (size_t i = lo + 1; i < hi; i++) {                                             \
                if (!LESS(&v[i], &v[i - 1]))                                                   \
                    continue;                                                                  \
                T x = v[i];                                                                    \
                size_t j = i;                                                                  \
                for (; j > lo && LESS(&x, &v[j - 1]); j--)                                     \
                    v[j] = v[j - 1];                                                           \
                v[j] = x;                                                                      \
            }                                                                                  \
        }                                                                                      \
        for (size_t w = RUN; w < n; w *= 2)                                                    \
            for (size_t lo = 0; lo + w < n; lo += 2 * w) {                                     \
                size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n;                     \
                if (!LESS(&v[mid], &v[mid - 1]))                                               \
                    continue;                                                                  \
                memcpy(tmp, v + lo, (mid - lo) * sizeof(T));                                   \
                size_t a = 0, na = mid - lo, b = mid, k = lo;                                  \
                while (a < na && b < hi)                                                       \
                    v[k++] = LESS(&v[b], &tmp[a]) ? v[b++] : tmp[a++];                         \
                while (a < na)                                                                 \
                    v[k++] = tmp[a++];                                                         \
            }                                                                                  \
    }

/* Defines name(v, n, k, tmp): v[0, k) already sorted by LESS, v[k, n) in any order; sorts
 * v[k, n) with SORT (a DEFINE_STABLE_SORT of the same T and LESS) and merges the two, stably (the
 * sorted part first among equals). When k is most of n, as in a window that keeps its sorted
 * entries and gains new ones, that costs n comparisons instead of n log n. tmp holds n elements. */
#define DEFINE_SORTED_APPEND(name, T, LESS, SORT)                                              \
    static void name(T *v, size_t n, size_t k, T *tmp)                                         \
    {                                                                                          \
        if (k > n)                                                                             \
            k = 0;                                                                             \
        if (n - k > 1)                                                                         \
            SORT(v + k, n - k, tmp);                                                           \
        if (k == 0 || k == n || !LESS(&v[k], &v[k - 1]))                                       \
            return;                                                                            \
        size_t lo = 0, hi = k;                                                                 \
        while (lo < hi) { /* the first sorted entry after v[k]: those before stay */           \
            size_t mid = lo + (hi - lo) / 2;                                                   \
            if (LESS(&v[k], &v[mid]))                                                          \
                hi = mid;                                                                      \
            else                                                                               \
                lo = mid + 1;                                                                  \
        }                                                                                      \
        memcpy(tmp, v + lo, (k - lo) * sizeof(T));                                             \
        size_t a = 0, na = k - lo, b = k, out = lo;                                            \
        while (a < na && b < n)                                                                \
            v[out++] = LESS(&v[b], &tmp[a]) ? v[b++] : tmp[a++];                               \
        while (a < na)                                                                         \
            v[out++] = tmp[a++];                                                               \
    }

#endif
