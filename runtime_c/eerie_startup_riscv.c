/* eerie_startup_riscv.c: start-up code for 32-bit RISC-V cores in machine mode (the firmware
 * project writes it as runtime/eerie_startup.c; same services as the Cortex-M start-up).
 *
 * _start (assembly: no stack and no gp yet) sets gp and sp, turns the FPU on when the code is
 * built for one (mstatus.FS starts Off, so the first FP instruction would trap), points mtvec at
 * the trap handler and jumps to Reset_Handler, which copies .data, clears .bss, paints the stack
 * for the high-water measurement and runs main. No picolibc crt0 (-nostartfiles): we must paint
 * the stack before main runs. Interrupts stay disabled (mstatus.MIE is 0 at reset). */
#include <stdint.h>
#include <string.h>

#include "eerie_rt.h"

/* Symbols from the board's linker script. */
extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern uint32_t __bss_start__[], __bss_end__[];
extern uint32_t __stack_limit__[], __stack_top__[];

#define EERIE_STACK_PAINT 0xC0FFEE5Au
#define EERIE_STACK_PAINT_ASM "0xC0FFEE5A"   /* the same, for assembly */

int main(void);
void Reset_Handler(void) __attribute__((noreturn));
void eerie_trap_handler(void) __attribute__((interrupt("machine"), aligned(4)));

/* The CSR instructions need Zicsr, which the -march string leaves out (see targets.py):
 * enabled for these few lines only. */
__asm__(
    "    .section .text.eerie_start, \"ax\", @progbits\n"
    "    .globl _start\n"
    "_start:\n"
    "    .option push\n"
    "    .option norelax\n"       /* gp is not set yet: this la must not be relaxed to use it */
    "    la gp, __global_pointer$\n"
    "    .option pop\n"
    "    la sp, __stack_top__\n"
    "    .option push\n"
    "    .option arch, +zicsr\n"
#if defined(__riscv_flen)
    "    li t0, 0x2000\n"         /* mstatus.FS = Initial */
    "    csrs mstatus, t0\n"
    "    csrwi fcsr, 0\n"
#endif
    "    la t0, eerie_trap_handler\n"
    "    csrw mtvec, t0\n"        /* direct mode: every trap enters the handler */
    "    .option pop\n"
    "    j Reset_Handler\n");

static uint32_t read_mcause(void)
{
    uint32_t v;
    __asm__ __volatile__(".option push\n\t.option arch, +zicsr\n\tcsrr %0, mcause\n\t.option pop"
                         : "=r"(v));
    return v;
}

/* Any trap is unexpected (no interrupt is ever enabled): report its cause and stop QEMU. */
void eerie_trap_handler(void)
{
    eerie_sh_puts("eerie: fault: the firmware took an unexpected trap\n");
    eerie_put_kv("mcause", read_mcause());
    eerie_sh_exit(3);
}

static uint32_t *current_sp(void)
{
    uint32_t *sp;
    EERIE_READ_SP(sp);
    return sp;
}

void Reset_Handler(void)
{
    uint32_t *p;
    uint32_t *sp;
    memcpy(__data_start__, __data_load__,
           (uint32_t)((uintptr_t)__data_end__ - (uintptr_t)__data_start__));
    memset(__bss_start__, 0, (uint32_t)((uintptr_t)__bss_end__ - (uintptr_t)__bss_start__));
    /* Paint the unused part of the stack; eerie_stack_high_water() finds the deepest word
     * that no longer holds the pattern. Stop short of our own frame. */
    sp = current_sp();
    for (p = __stack_limit__; p < sp - 4; ++p) {
        *p = EERIE_STACK_PAINT;
    }
    eerie_counter_init();
    eerie_sh_exit(main());
}

uint32_t eerie_stack_high_water(void)
{
    const uint32_t *p = __stack_limit__;
    while (p < __stack_top__ && *p == EERIE_STACK_PAINT) {
        ++p;
    }
    return (uint32_t)((uintptr_t)__stack_top__ - (uintptr_t)p);
}

/* Naked, so it has no frame: it repaints every word below the caller's sp (a0) with temporaries
 * only, and the measurement after the call counts exactly what the call wrote. (The Cortex-M
 * version, in C, must stop 32 bytes short of its own frame; those words may hold older data
 * and read as used. RISC-V frames are small enough for that to exceed a model's bound.) */
__attribute__((naked)) void eerie_stack_repaint(const uint32_t *sp __attribute__((unused)))
{
    __asm__ __volatile__(
        "    la t0, __stack_limit__\n"
        "    li t1, " EERIE_STACK_PAINT_ASM "\n"
        "    bgeu t0, a0, 2f\n"
        "1:  sw t1, 0(t0)\n"
        "    addi t0, t0, 4\n"
        "    bltu t0, a0, 1b\n"
        "2:  ret\n");
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
