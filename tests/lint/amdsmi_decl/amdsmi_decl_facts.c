/*
 * amdsmi_decl_facts.c: prints what the C compiler makes of src/gpu/amdsmi_decl.h, one fact a
 * line, for tests/lint/amdsmi_decl/check_amdsmi_decl.py to compare with AMD's ctypes binding:
 *   code    NAME VALUE                         each X of ERG_AMDSMI_CODES
 *   define  NAME VALUE                         each object-like ERG_AMDSMI_ macro
 *   ret     KIND SIZE                          erg_amdsmi_ret, the return type of every call
 *   struct  TYPE SIZE                          each of our structs
 *   field   TYPE FIELD OFFSET SIZE KIND        each field we name
 *   call    SYMBOL NPARAMS                     each X of ERG_AMDSMI_CALLS
 *   param   SYMBOL INDEX C-TYPE KIND SIZE      each of its parameters
 * KIND is the type as the compiler sees it (through every typedef): u4/i8 (unsigned/signed
 * integer of 4/8 bytes), b1 (_Bool), c1 (char), f4/f8 (float/double), s:NAME (our struct NAME),
 * p:KIND (pointer to KIND, or an array of KIND decayed), p:v (void *), ? (none of these).
 * The structs, their fields and the defines come from amdsmi_decl_structs.inc, which the checker
 * writes from the header's text (a field added to the header is checked without editing this).
 * Built and run by the checker with the header under test first on the include path.
 */
#include <stddef.h>
#include <stdio.h>

#include "gpu/amdsmi_decl.h"
#include "amdsmi_decl_structs.inc"

#define KINDS(B, D)                                                                                \
    B:                                                                                             \
    D, B * : "p:" D, const B * : "p:" D, B ** : "p:p:" D, const B ** : "p:p:" D
#define KIND(e)                                                                                    \
    _Generic((e), KINDS(_Bool, "b1"), KINDS(char, "c1"), KINDS(signed char, "i1"),               \
             KINDS(unsigned char, "u1"), KINDS(short, "i2"), KINDS(unsigned short, "u2"),         \
             KINDS(int, "i4"), KINDS(unsigned int, "u4"), KINDS(long, "i8"),                      \
             KINDS(unsigned long, "u8"), KINDS(long long, "i8"),                                  \
             KINDS(unsigned long long, "u8"), KINDS(float, "f4"), KINDS(double, "f8"),            \
             void *: "p:v", const void *: "p:v", void **: "p:p:v", const void **: "p:p:v",        \
             ERG_DECL_STRUCT_KINDS default: "?")
_Static_assert(sizeof(long) == 8, "the kinds above assume LP64 (as AMD's binding: WORD_SIZE 8)");

/* Each parameter of a list such as (a, b, c), skipping the single `void` of an empty list. */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SECOND_(a, b, ...) b
#define SECOND(...) SECOND_(__VA_ARGS__)
#define PROBE_void ~, 1
#define IS_VOID(T) SECOND(CAT(PROBE_, T), 0, ~)
#define NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define NARGS(...) NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define EACH_1(M, a) M(0, a)
#define EACH_2(M, a, b) EACH_1(M, a) M(1, b)
#define EACH_3(M, a, b, c) EACH_2(M, a, b) M(2, c)
#define EACH_4(M, a, b, c, d) EACH_3(M, a, b, c) M(3, d)
#define EACH_5(M, a, b, c, d, e) EACH_4(M, a, b, c, d) M(4, e)
#define EACH_6(M, a, b, c, d, e, f) EACH_5(M, a, b, c, d, e) M(5, f)
#define EACH_7(M, a, b, c, d, e, f, g) EACH_6(M, a, b, c, d, e, f) M(6, g)
#define EACH_8(M, a, b, c, d, e, f, g, h) EACH_7(M, a, b, c, d, e, f, g) M(7, h)
#define EACH_PARAM(...) CAT(EACH_, NARGS(__VA_ARGS__))(PARAM, __VA_ARGS__)
#define PARAM(i, T) CAT(PARAM_VOID, IS_VOID(T))(i, T)
#define PARAM_VOID1(i, T)
#define PARAM_VOID0(i, T)                                                                          \
    n++;                                                                                           \
    printf("param\t%s\t%d\t%s\t%s\t%zu\n", sym, i, #T, KIND(*(T *)0), sizeof(T));

int main(void)
{
#define CODE(name, value) printf("code\t%s\t%lld\n", #name, (long long)(value));
    ERG_AMDSMI_CODES(CODE)
#define DEFINE(name) printf("define\t%s\t%llu\n", #name, (unsigned long long)(name));
    ERG_DECL_DEFINES(DEFINE)
    printf("ret\t%s\t%zu\n", KIND((erg_amdsmi_ret)0), sizeof(erg_amdsmi_ret));
#define STRUCT(T) printf("struct\t%s\t%zu\n", #T, sizeof(T));
#define FIELD(T, f)                                                                                \
    printf("field\t%s\t%s\t%zu\t%zu\t%s\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f),           \
           KIND(((T *)0)->f));
    ERG_DECL_STRUCTS(STRUCT, FIELD)
#define CALL(field, symbol, required, params)                                                      \
    {                                                                                              \
        const char *sym = #symbol;                                                                 \
        int n = 0;                                                                                 \
        EACH_PARAM params printf("call\t%s\t%d\n", sym, n);                                        \
    }
    ERG_AMDSMI_CALLS(CALL)
    return 0;
}
