/* eerie_stm32f4.c: the STM32F405/407 part for eerie-c firmware: its interrupt vectors and a
 * polled USART1 driver for eerie_uart.c. Register addresses from ST's RM0090.
 *
 * Clock: the part runs from its 16 MHz internal RC oscillator (HSI) as it leaves reset; the
 * PLL is not started because QEMU models no RCC (its registers read 0, so waiting for
 * "PLL ready" would hang there). On a physical board that means 16 MHz, not 168 MHz, with
 * flash at zero wait states; USART1's baud divider is computed for that clock.
 * Pins: USART1 TX on PA9, RX on PA10 (alternate function 7), 115200 baud, 8N1. */
#include <stdint.h>

#include "eerie_rt.h"
#include "eerie_uart.h"

#define REG(addr) (*(volatile uint32_t *)(addr))

#define RCC_AHB1ENR REG(0x40023830u)
#define RCC_APB2ENR REG(0x40023844u)
#define FLASH_ACR REG(0x40023C00u)
#define GPIOA_MODER REG(0x40020000u)
#define GPIOA_PUPDR REG(0x4002000Cu)
#define GPIOA_AFRH REG(0x40020024u)
#define USART1_SR REG(0x40011000u)
#define USART1_DR REG(0x40011004u)
#define USART1_BRR REG(0x40011008u)
#define USART1_CR1 REG(0x4001100Cu)

#define SR_TXE (1u << 7)
#define SR_TC (1u << 6)
#define SR_RXNE (1u << 5)
#define CR1_UE (1u << 13)
#define CR1_TE (1u << 3)
#define CR1_RE (1u << 2)

#ifndef EERIE_UART_CLOCK_HZ
#define EERIE_UART_CLOCK_HZ 16000000u   /* APB2 = HSI after reset */
#endif
#ifndef EERIE_UART_BAUD
#define EERIE_UART_BAUD 115200u
#endif

void eerie_fault_handler(void);

/* The part's 82 interrupt vectors follow the 16 core entries of eerie_startup.c (the
 * linker script places .vectors.irq right after .vectors). eerie-c enables no peripheral
 * interrupt, so any that fires is a fault: it is reported and the run ends. */
#define F eerie_fault_handler
#define F10 F, F, F, F, F, F, F, F, F, F
__attribute__((section(".vectors.irq"), used))
void (*const eerie_stm32f4_irq_vectors[82])(void) = {
    F10, F10, F10, F10, F10, F10, F10, F10, F, F,   /* IRQ 0-81 */
};
#undef F10
#undef F

void eerie_uart_init(void)
{
    /* Flash: prefetch and the ART instruction/data caches (no effect under QEMU, where
     * this register block is unimplemented and writes are ignored). */
    FLASH_ACR = (1u << 8) | (1u << 9) | (1u << 10);
    RCC_AHB1ENR |= 1u << 0;   /* GPIOA */
    RCC_APB2ENR |= 1u << 4;   /* USART1 */
    (void)RCC_APB2ENR;        /* RM0090: wait for the clock to reach the peripheral */
    __asm__ __volatile__("dsb" ::: "memory");
    /* PA9, PA10: alternate function 7 (USART1); a pull-up keeps an unconnected RX idle. */
    GPIOA_MODER = (GPIOA_MODER & ~(0xFu << 18)) | (0xAu << 18);
    GPIOA_AFRH = (GPIOA_AFRH & ~(0xFFu << 4)) | (0x77u << 4);
    GPIOA_PUPDR = (GPIOA_PUPDR & ~(0x3u << 20)) | (0x1u << 20);
    /* 16x oversampling: BRR is the clock over the baud rate, rounded (QEMU ignores it). */
    USART1_BRR = (EERIE_UART_CLOCK_HZ + EERIE_UART_BAUD / 2u) / EERIE_UART_BAUD;
    USART1_CR1 = CR1_UE | CR1_TE | CR1_RE;
}

void eerie_uart_putc(uint8_t c)
{
    /* A fault before main() set the USART up still gets its message out (on the part an
     * unclocked USART never shows TXE, and the fault handler would wait forever). */
    if ((USART1_CR1 & CR1_UE) == 0u) {
        eerie_uart_init();
    }
    while ((USART1_SR & SR_TXE) == 0u) {
    }
    USART1_DR = c;
}

uint8_t eerie_uart_getc(void)
{
    /* Reading SR then DR also clears an overrun; a byte lost to one fails the frame's CRC. */
    while ((USART1_SR & SR_RXNE) == 0u) {
    }
    return (uint8_t)USART1_DR;
}

void eerie_uart_flush(void)
{
    while ((USART1_SR & SR_TC) == 0u) {
    }
}
