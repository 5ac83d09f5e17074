/* eerie_rt.c: semihosting, the SysTick instruction counter and console helpers. */
#include <stdint.h>

#include "eerie_rt.h"

#ifndef EERIE_CONSOLE_UART

/* ---- ARM semihosting: "bkpt 0xAB" with the operation in r0 and a parameter in r1.
 * QEMU serves it with -semihosting-config enable=on,target=native; paths are relative to
 * the directory QEMU runs in. The calls themselves: eerie_semihosting.h. */
static uint32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ __volatile__("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

#include "eerie_semihosting.h"

void eerie_puts(const char *s)
{
    eerie_sh_puts(s);
}

void eerie_exit(int status)
{
    eerie_sh_exit(status);
}
#endif /* !EERIE_CONSOLE_UART */

void eerie_put_u64(uint64_t v)
{
    char buf[24];
    int i = 22;
    buf[23] = '\0';
    do {
        buf[i--] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u && i >= 0);
    eerie_puts(&buf[i + 1]);
}

void eerie_put_kv(const char *key, uint64_t value)
{
    eerie_puts("eerie: ");
    eerie_puts(key);
    eerie_puts(" ");
    eerie_put_u64(value);
    eerie_puts("\n");
}

/* ---- SysTick instruction counter.
 * SysTick is a 24-bit down-counter: the interrupt handler counts wraps so that long runs
 * are measured exactly. Two details matter:
 *  - after CVR is cleared, the first reload (0 -> RVR) raises no interrupt, so we wait for
 *    it in eerie_counter_init() before any reading is taken;
 *  - CVR == 0 is ambiguous (the wrap interrupt may or may not have been counted yet), so a
 *    reading never uses it: it waits one tick for the reload. */
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#ifndef EERIE_SYSTICK_RELOAD
#define EERIE_SYSTICK_RELOAD 0x00FFFFFFu
#endif
#ifndef EERIE_INSNS_PER_TICK_NUM
#define EERIE_INSNS_PER_TICK_NUM 40u
#endif
#ifndef EERIE_INSNS_PER_TICK_DEN
#define EERIE_INSNS_PER_TICK_DEN 1u
#endif

static volatile uint32_t systick_wraps;

void SysTick_Handler(void)
{
    systick_wraps = systick_wraps + 1u;
}

void eerie_counter_init(void)
{
    SYST_CSR = 0u;
    SYST_RVR = EERIE_SYSTICK_RELOAD;
    SYST_CVR = 0u;
    systick_wraps = 0u;
    SYST_CSR = 7u;  /* enable, interrupt on wrap, processor clock */
    while (SYST_CVR == 0u) {
    }
}

uint64_t eerie_counter_ticks(void)
{
    uint32_t wraps, cvr;
    do {
        wraps = systick_wraps;
        cvr = SYST_CVR;
    } while (cvr == 0u || wraps != systick_wraps);
    return (uint64_t)wraps * ((uint64_t)EERIE_SYSTICK_RELOAD + 1u) + (EERIE_SYSTICK_RELOAD - cvr);
}

uint64_t eerie_ticks_to_instructions(uint64_t ticks)
{
    return ticks * EERIE_INSNS_PER_TICK_NUM / EERIE_INSNS_PER_TICK_DEN;
}
