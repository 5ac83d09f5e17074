/* eerie_rt.h: the small bare-metal runtime eerie-c firmware projects link with.
 *
 * Start-up (eerie_startup.c): vector table, reset handler (.data copy, .bss clear, stack
 * painting, FPU enable), fault handlers that report and stop QEMU.
 * Services (eerie_rt.c): ARM semihosting (files and console on the host running QEMU),
 * a SysTick-based instruction counter and the stack high-water measurement.
 * Boards without semihosting (a real part: an unanswered "bkpt 0xAB" locks it up) build
 * with -DEERIE_CONSOLE_UART: eerie_rt.c then leaves semihosting out and the console is
 * framed text on a UART (eerie_uart.c, with the part's driver such as eerie_stm32f4.c).
 * RISC-V boards get eerie_startup_riscv.c / eerie_rt_riscv.c behind the same API (written
 * into the project under the same names; the counter is the minstret CSR there).
 * No newlib start-up code and no stdio: the runtime needs only memcpy/memset from libc. */
#ifndef EERIE_RT_H
#define EERIE_RT_H

#include <stdint.h>

/* The console: semihosting's, or the UART's with EERIE_CONSOLE_UART. eerie_exit ends the
 * run: QEMU exits (semihosting) or the host runner sees the "done" frame (UART). */
void eerie_puts(const char *s);
void eerie_exit(int status) __attribute__((noreturn));

#ifndef EERIE_CONSOLE_UART
/* Semihosting open modes (the ISO C fopen modes, numbered as the ARM spec does). */
#define EERIE_SH_MODE_RB 1
#define EERIE_SH_MODE_WB 5

int eerie_sh_open(const char *path, int mode);           /* handle, or -1 */
int eerie_sh_close(int handle);
uint32_t eerie_sh_read(int handle, void *buf, uint32_t len);       /* bytes read */
uint32_t eerie_sh_write(int handle, const void *buf, uint32_t len); /* bytes written */
void eerie_sh_puts(const char *s);                        /* to QEMU's stdout */
void eerie_sh_exit(int status) __attribute__((noreturn));  /* ends the QEMU run */
#endif

/* Console helpers: decimal numbers without printf. */
void eerie_put_u64(uint64_t v);
void eerie_put_kv(const char *key, uint64_t value);       /* "eerie: KEY VALUE\n" */

/* Instruction counter. Under QEMU -icount shift=0 SysTick advances one tick every
 * EERIE_INSNS_PER_TICK_NUM / EERIE_INSNS_PER_TICK_DEN instructions (board data). */
void eerie_counter_init(void);
uint64_t eerie_counter_ticks(void);     /* monotonic SysTick ticks since init */
uint64_t eerie_ticks_to_instructions(uint64_t ticks);

/* Stack: the reset handler paints the stack region; this returns the deepest use so far
 * in bytes (from the top of the stack down to the lowest overwritten word). */
uint32_t eerie_stack_high_water(void);
uint32_t eerie_stack_size(void);

/* Stack use of one call, to compare with the compiler's proven bound: read the caller's
 * stack pointer with EERIE_READ_SP() right before the call, re-paint everything below it
 * with eerie_stack_repaint(sp), make the call, then eerie_stack_used_below(sp) is the
 * number of bytes below sp that the call (and any interrupt taken during it) wrote. */
#if defined(__riscv)
#define EERIE_READ_SP(var) __asm__ __volatile__("mv %0, sp" : "=r"(var))
#else
#define EERIE_READ_SP(var) __asm__ __volatile__("mov %0, sp" : "=r"(var))
#endif
void eerie_stack_repaint(const uint32_t *sp);
uint32_t eerie_stack_used_below(const uint32_t *sp);

#endif /* EERIE_RT_H */
