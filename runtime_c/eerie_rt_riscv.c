/* eerie_rt_riscv.c: semihosting, the minstret instruction counter and console helpers for
 * 32-bit RISC-V (the firmware project writes it as runtime/eerie_rt.c; same API as the
 * Cortex-M runtime, eerie_rt.h). */
#include <stdint.h>

#include "eerie_rt.h"

/* ---- RISC-V semihosting: the ARM semihosting operations, trapped by the three-instruction
 * sequence "slli zero,zero,0x1f; ebreak; srai zero,zero,7" (operation in a0, parameter in
 * a1, result in a0). The sequence must stay uncompressed, and QEMU only recognises it when
 * all three words lie in one page: aligning it to 16 bytes guarantees that. On RV32 the
 * parameter block holds 32-bit words and SYS_EXIT takes the reason itself, as on AArch32.
 * QEMU serves it with -semihosting-config enable=on,target=native. */

static uint32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t a0 __asm__("a0") = op;
    register const void *a1 __asm__("a1") = arg;
    __asm__ __volatile__(".balign 16\n\t.option push\n\t.option norvc\n\t"
                         "slli zero, zero, 0x1f\n\tebreak\n\tsrai zero, zero, 7\n\t.option pop"
                         : "+r"(a0) : "r"(a1) : "memory");
    return a0;
}

#include "eerie_semihosting.h"

void eerie_put_u64(uint64_t v)
{
    char buf[24];
    int i = 22;
    buf[23] = '\0';
    do {
        buf[i--] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u && i >= 0);
    eerie_sh_puts(&buf[i + 1]);
}

void eerie_put_kv(const char *key, uint64_t value)
{
    eerie_sh_puts("eerie: ");
    eerie_sh_puts(key);
    eerie_sh_puts(" ");
    eerie_put_u64(value);
    eerie_sh_puts("\n");
}

/* ---- Instruction counter: the minstret CSR counts retired instructions (64 bits, read as
 * two halves on RV32: re-read when the high half moved in between). Under QEMU -icount
 * shift=0 it is QEMU's instruction count, exact and deterministic; on silicon it is the
 * core's own count. One "tick" is one instruction (EERIE_INSNS_PER_TICK_NUM/DEN = 1/1). */
#ifndef EERIE_INSNS_PER_TICK_NUM
#define EERIE_INSNS_PER_TICK_NUM 1u
#endif
#ifndef EERIE_INSNS_PER_TICK_DEN
#define EERIE_INSNS_PER_TICK_DEN 1u
#endif

void eerie_counter_init(void)
{
    /* minstret runs from reset unless mcountinhibit.IR is set, which no boot code here does. */
}

uint64_t eerie_counter_ticks(void)
{
    uint32_t hi, lo, hi2;
    do {
        __asm__ __volatile__(".option push\n\t.option arch, +zicsr\n\t"
                             "csrr %0, minstreth\n\tcsrr %1, minstret\n\tcsrr %2, minstreth\n\t"
                             ".option pop"
                             : "=r"(hi), "=r"(lo), "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

uint64_t eerie_ticks_to_instructions(uint64_t ticks)
{
    return ticks * EERIE_INSNS_PER_TICK_NUM / EERIE_INSNS_PER_TICK_DEN;
}
