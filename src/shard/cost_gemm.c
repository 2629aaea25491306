/* cost_gemm.c: measured compute for the shard cost model (cost.c): the local GEMM of a dot
 * timed with CPU BLAS or with cuBLAS loaded by dlopen at run time, and the CSV cache of those
 * times (batch,m,n,k,time_s) that later runs read back instead of timing again. */
#include "shard/shard_internal.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* OpenBLAS is loaded by the first GEMM timed on the CPU (core/lazylib.c) */
#define BLAS_FUNCS(X) X(cblas_sgemm)
ERG__LAZY_LIB(blas_lib, ERG_SONAME_OPENBLAS, "GEMM timing with CPU BLAS (--compute blas)",
              BLAS_FUNCS)
#define cblas_sgemm (*lz_cblas_sgemm)

double erg__shard_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

erg_status erg__shard_cublas_open(timer_ctx *t, erg_error *err)
{
    const char *rt[] = {"libcudart.so", "libcudart.so.12", "libcudart.so.11.0"};
    const char *bl[] = {"libcublas.so", "libcublas.so.12", "libcublas.so.11"};
    for (size_t i = 0; i < ERG__ARRAY_LEN(rt) && !t->hcudart; i++)
        t->hcudart = dlopen(rt[i], RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < ERG__ARRAY_LEN(bl) && !t->hcublas; i++)
        t->hcublas = dlopen(bl[i], RTLD_NOW | RTLD_LOCAL);
    if (!t->hcudart || !t->hcublas)
        return erg_error_set(err, ERG_ENOGPU,
                             "cuBLAS unavailable: could not load libcudart/libcublas (no CUDA "
                             "runtime on this machine)");
    *(void **)&t->cudaMalloc = dlsym(t->hcudart, "cudaMalloc");
    *(void **)&t->cudaFree = dlsym(t->hcudart, "cudaFree");
    *(void **)&t->cudaDeviceSynchronize = dlsym(t->hcudart, "cudaDeviceSynchronize");
    *(void **)&t->cublasCreate = dlsym(t->hcublas, "cublasCreate_v2");
    *(void **)&t->cublasDestroy = dlsym(t->hcublas, "cublasDestroy_v2");
    *(void **)&t->cublasSgemm = dlsym(t->hcublas, "cublasSgemm_v2");
    if (!t->cudaMalloc || !t->cudaFree || !t->cudaDeviceSynchronize || !t->cublasCreate ||
        !t->cublasDestroy || !t->cublasSgemm)
        return erg_error_set(err, ERG_ENOGPU, "cuBLAS unavailable: missing symbols");
    if (t->cublasCreate(&t->handle) != 0)
        return erg_error_set(err, ERG_ENOGPU, "cuBLAS unavailable: cublasCreate failed (no GPU?)");
    return ERG_OK;
}

void erg__shard_cublas_close(timer_ctx *t)
{
    if (t->handle && t->cublasDestroy)
        t->cublasDestroy(t->handle);
    if (t->hcublas)
        dlclose(t->hcublas);
    if (t->hcudart)
        dlclose(t->hcudart);
}

erg_status erg__shard_time_gemm(timer_ctx *t, int64_t b, int64_t m, int64_t n, int64_t k,
                                double *out, erg_error *err)
{
    for (int i = 0; i < t->n; i++)
        if (t->tab[i].b == b && t->tab[i].m == m && t->tab[i].n == n && t->tab[i].k == k) {
            *out = t->tab[i].time_s;
            return ERG_OK;
        }
    if (m <= 0 || n <= 0 || k <= 0 || b <= 0 || (double)m * (double)k > 4e8 ||
        (double)k * (double)n > 4e8 || (double)m * (double)n > 4e8)
        return erg_error_set(err, ERG_EINVAL, "GEMM %lldx%lldx%lld too large to time", (long long)m,
                             (long long)n, (long long)k);
    double best = INFINITY;
    if (t->mode == ERG_SHARD_COMPUTE_BLAS) {
        erg_status lst = erg__lazylib_load(&blas_lib, err);
        if (lst != ERG_OK)
            return lst;
        float *A = erg__calloc((size_t)(m * k), sizeof(float));
        float *B = erg__calloc((size_t)(k * n), sizeof(float));
        float *C = erg__calloc((size_t)(m * n), sizeof(float));
        if (!A || !B || !C) {
            erg__free(A);
            erg__free(B);
            erg__free(C);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        for (int64_t i = 0; i < m * k; i++)
            A[i] = (float)(i % 7) * 0.1f;
        for (int64_t i = 0; i < k * n; i++)
            B[i] = (float)(i % 5) * 0.1f;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = erg__shard_now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, A,
                        (int)k, B, (int)n, 0.0f, C, (int)n);
            double dt = erg__shard_now_s() - t0;
            best = ERG__MIN(best, dt);
        }
        erg__free(A);
        erg__free(B);
        erg__free(C);
    } else {
        void *A = NULL, *B = NULL, *C = NULL;
        if (t->cudaMalloc(&A, (size_t)(m * k) * 4) || t->cudaMalloc(&B, (size_t)(k * n) * 4) ||
            t->cudaMalloc(&C, (size_t)(m * n) * 4)) {
            if (A)
                t->cudaFree(A);
            if (B)
                t->cudaFree(B);
            return erg_error_set(err, ERG_ENOGPU, "cudaMalloc failed");
        }
        float one = 1, zero = 0;
        for (int rep = 0; rep < 4; rep++) {
            t->cudaDeviceSynchronize();
            double t0 = erg__shard_now_s();
            t->cublasSgemm(t->handle, 0, 0, (int)n, (int)m, (int)k, &one, B, (int)n, A, (int)k,
                           &zero, C, (int)n);
            t->cudaDeviceSynchronize();
            double dt = erg__shard_now_s() - t0;
            if (rep)
                best = ERG__MIN(best, dt);
        }
        t->cudaFree(A);
        t->cudaFree(B);
        t->cudaFree(C);
    }
    best *= (double)b;
    if (!ERG__GROW(t->tab, t->cap, t->n + 1, 64))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    t->tab[t->n++] = (gemm_key){b, m, n, k, best};
    *out = best;
    return ERG_OK;
}

erg_status erg__shard_gemm_cache_load(timer_ctx *t, const char *path, erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_error e2;
    if (erg__read_file(path, 64 << 20, &text, &len, &e2))
        return ERG_OK; /* no cache yet */
    erg__csv c;
    erg__csv_init(&c, text, len);
    erg_status st = ERG_OK;
    int r;
    bool header = true;
    while ((r = erg__csv_next(&c)) > 0) {
        if (header) {
            header = false;
            continue;
        }
        long v[4];
        double ts;
        if (c.nfields != 5 || !erg__parse_long(c.fields[0], &v[0]) ||
            !erg__parse_long(c.fields[1], &v[1]) || !erg__parse_long(c.fields[2], &v[2]) ||
            !erg__parse_long(c.fields[3], &v[3]) || !erg__parse_double(c.fields[4], &ts) ||
            ts < 0) {
            st =
                erg_error_set(err, ERG_EPARSE, "%s:%ld: expected batch,m,n,k,time_s", path, c.line);
            break;
        }
        if (!ERG__GROW(t->tab, t->cap, t->n + 1, 64)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            break;
        }
        t->tab[t->n++] = (gemm_key){v[0], v[1], v[2], v[3], ts};
    }
    erg__csv_free(&c);
    erg__free(text);
    return st;
}

erg_status erg__shard_gemm_cache_save(timer_ctx *t, const char *path, erg_error *err)
{
    erg__buf b = {0};
    erg_status st = erg__buf_printf(&b, "batch,m,n,k,time_s\n");
    for (int i = 0; i < t->n && !st; i++) {
        char num[40];
        erg__fmt_double_py(t->tab[i].time_s, num, sizeof num);
        st = erg__buf_printf(&b, "%lld,%lld,%lld,%lld,%s\n", (long long)t->tab[i].b,
                             (long long)t->tab[i].m, (long long)t->tab[i].n, (long long)t->tab[i].k,
                             num);
    }
    if (!st)
        st = erg__write_file(path, b.data, b.len, err);
    else
        erg_error_set(err, st, "out of memory");
    erg__buf_free(&b);
    return st;
}
