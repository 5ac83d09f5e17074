/* eerie_startup.c: vector table and reset handler for Cortex-M (v6-M, v7-M, v8-M).
 *
 * Our own start-up instead of newlib's crt0: rdimon's crt0 moves the stack pointer to an
 * address outside the RAM of some QEMU boards, and we need to paint the stack before main
 * runs to measure its high-water mark. Link with -nostartfiles. */
#include <stdint.h>
#include <string.h>

#include "eerie_rt.h"

/* Symbols from the board's linker script. */
extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern uint32_t __bss_start__[], __bss_end__[];
extern uint32_t __stack_limit__[], __stack_top__[];
/* A second zero-initialised range, for boards whose script puts the arena in another RAM
 * (netduinoplus2.ld: CCM). Weak, so that other scripts need not define them: both are then
 * 0 and there is nothing to clear. */
extern uint32_t __bss2_start__[] __attribute__((weak));
extern uint32_t __bss2_end__[] __attribute__((weak));

#define EERIE_STACK_PAINT 0xC0FFEE5Au

int main(void);
void Reset_Handler(void) __attribute__((noreturn));
void SysTick_Handler(void);
void eerie_fault_handler(void);

/* The first 16 entries of the vector table: initial stack pointer, then the system
 * exceptions. The model never enables an external interrupt, so none are listed. */
struct eerie_vectors {
    uint32_t *initial_sp;
    void (*handler[15])(void);
};

__attribute__((section(".vectors"), used))
const struct eerie_vectors eerie_vector_table = {
    __stack_top__,
    {
        Reset_Handler,          /* 1 reset */
        eerie_fault_handler,    /* 2 NMI */
        eerie_fault_handler,    /* 3 HardFault */
        eerie_fault_handler,    /* 4 MemManage */
        eerie_fault_handler,    /* 5 BusFault */
        eerie_fault_handler,    /* 6 UsageFault */
        eerie_fault_handler,    /* 7 SecureFault (v8-M) */
        0, 0, 0,                /* 8-10 reserved */
        eerie_fault_handler,    /* 11 SVCall */
        eerie_fault_handler,    /* 12 DebugMonitor */
        0,                      /* 13 reserved */
        eerie_fault_handler,    /* 14 PendSV */
        SysTick_Handler,        /* 15 SysTick */
    },
};

void eerie_fault_handler(void)
{
    eerie_puts("eerie: fault: the firmware took an unexpected exception\n");
    eerie_exit(3);
}

static uint32_t *current_sp(void)
{
    uint32_t *sp;
    __asm__ __volatile__("mov %0, sp" : "=r"(sp));
    return sp;
}

void Reset_Handler(void)
{
    uint32_t *p;
    uint32_t *sp;
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* Grant full access to coprocessors 10 and 11 (the FPU, and MVE on v8.1-M) before any
     * floating-point instruction runs; the compiler may use FP registers anywhere after. */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm__ __volatile__("dsb\n\tisb" ::: "memory");
#endif
#if defined(__ARM_ARCH_6M__)
    /* ARMv6-M cores fault on every unaligned halfword or word access (CCR.UNALIGN_TRP reads
     * as one there). Set the bit so that ARMv6-M code run on a bigger core, or on an emulator
     * that does not model the rule (QEMU's Cortex-M0), faults exactly as a real M0 would. */
    *(volatile uint32_t *)0xE000ED14u |= (1u << 3);
#endif
    memcpy(__data_start__, __data_load__,
           (uint32_t)((uintptr_t)__data_end__ - (uintptr_t)__data_start__));
    memset(__bss_start__, 0, (uint32_t)((uintptr_t)__bss_end__ - (uintptr_t)__bss_start__));
    if ((uintptr_t)__bss2_end__ != (uintptr_t)__bss2_start__) {
        memset(__bss2_start__, 0, (uint32_t)((uintptr_t)__bss2_end__ - (uintptr_t)__bss2_start__));
    }
    /* Paint the unused part of the stack; eerie_stack_high_water() finds the deepest word
     * that no longer holds the pattern. Stop short of our own frame. */
    sp = current_sp();
    for (p = __stack_limit__; p < sp - 4; ++p) {
        *p = EERIE_STACK_PAINT;
    }
    eerie_counter_init();
    eerie_exit(main());
}

uint32_t eerie_stack_high_water(void)
{
    const uint32_t *p = __stack_limit__;
    while (p < __stack_top__ && *p == EERIE_STACK_PAINT) {
        ++p;
    }
    return (uint32_t)((uintptr_t)__stack_top__ - (uintptr_t)p);
}

void eerie_stack_repaint(const uint32_t *sp)
{
    /* Our own frame sits below the caller's sp: stop short of it (and of a small margin). */
    uint32_t *p;
    uint32_t *own = current_sp() - 8;
    const uint32_t *stop = own < sp ? own : sp;
    for (p = __stack_limit__; p < stop; ++p) {
        *p = EERIE_STACK_PAINT;
    }
}

uint32_t eerie_stack_used_below(const uint32_t *sp)
{
    const uint32_t *p = __stack_limit__;
    while (p < sp && *p == EERIE_STACK_PAINT) {
        ++p;
    }
    return (uint32_t)((uintptr_t)sp - (uintptr_t)p);
}

uint32_t eerie_stack_size(void)
{
    return (uint32_t)((uintptr_t)__stack_top__ - (uintptr_t)__stack_limit__);
}
