// The floor's kernels (kernels/helpers.cu, compiled into the program) and its argument
// sets of 3, 10 and 30 parameters (benchmarks/argsets.py lists the same).
// Included once, by floor.cu, after Failure, g_buf and the sizes.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

// The kernels are kernels/helpers.cu's own (empty, empty3, args10, args30, spin, ...).
#include "../kernels/helpers.cu"

// ---- argument sets: 3, 10, 30 parameters, as benchmarks/argsets.py lists them -----------

// Values stored per parameter, in the parameter's own C type; args[] points at them.
struct ArgSet {
    const void* func = nullptr;
    int n = 0;
    std::vector<char> kinds;  // 'p' pointer, 'f' float, 'i' int, 'q' long long, 'd' double, 'u' unsigned
    std::vector<unsigned long long> store;  // 8 bytes per parameter
    std::vector<void*> args;

    ArgSet(const void* f, const char* k) : func(f), n((int)std::strlen(k)), kinds(k, k + n),
                                           store(n), args(n)
    {
        for (int i = 0; i < n; ++i) {
            args[i] = &store[i];
        }
        write_all(1.0);
    }

    // Each value as benchmarks/argsets.values gives it (a + i for floats, 3 + i for ints).
    void write(int i, double a)
    {
        void* dst = &store[i];
        switch (kinds[i]) {
        case 'p': { float* p = g_buf; std::memcpy(dst, &p, sizeof p); break; }
        case 'f': { float v = (float)(a + i); std::memcpy(dst, &v, sizeof v); break; }
        case 'd': { double v = a + i; std::memcpy(dst, &v, sizeof v); break; }
        case 'i': { int v = 3 + i; std::memcpy(dst, &v, sizeof v); break; }
        case 'u': { unsigned v = 3u + (unsigned)i; std::memcpy(dst, &v, sizeof v); break; }
        default: { long long v = 3 + i; std::memcpy(dst, &v, sizeof v); break; }
        }
    }

    void write_all(double a)
    {
        for (int i = 0; i < n; ++i) {
            write(i, a);
        }
    }

    cudaKernelNodeParams params()
    {
        cudaKernelNodeParams p = {};
        p.func = const_cast<void*>(func);
        p.gridDim = dim3(1, 1, 1);
        p.blockDim = dim3(1, 1, 1);
        p.sharedMemBytes = 0;
        p.kernelParams = args.data();
        p.extra = nullptr;
        return p;
    }
};

static ArgSet* arg_set(int n)
{
    static std::map<int, ArgSet*> sets;
    if (!sets.count(n)) {
        if (n == 3) {
            sets[n] = new ArgSet((const void*)empty3, "pfi");
        } else if (n == 10) {
            sets[n] = new ArgSet((const void*)args10, "pfpipqpfid");
        } else if (n == 30) {
            sets[n] = new ArgSet((const void*)args30, "pfpipqpfpdpupfpipqpfpdpufifiii");
        } else {
            throw Failure{"no kernel of " + std::to_string(n) + " arguments"};
        }
    }
    return sets[n];
}
