/* eerie_uart.c: frames on the UART (see eerie_uart.h) and the console that uses them. */
#include <stdint.h>

#include "eerie_rt.h"
#include "eerie_uart.h"

/* ---- CRC-32 (zlib's: reflected polynomial 0xEDB88320), bit by bit. A table would cost
 * 1 KiB of flash for a speed the UART does not need: at 115200 baud a byte takes 87 us,
 * the eight steps well under one. */
static uint32_t crc_tx, crc_rx;

static uint32_t crc_update(uint32_t crc, uint8_t byte)
{
    int k;
    crc ^= byte;
    for (k = 0; k < 8; ++k) {
        crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return crc;
}

static void put_tracked(uint8_t c)
{
    crc_tx = crc_update(crc_tx, c);
    eerie_uart_putc(c);
}

static void put_u32_tracked(uint32_t v)
{
    int k;
    for (k = 0; k < 4; ++k) {
        put_tracked((uint8_t)(v >> (8 * k)));
    }
}

void eerie_frame_begin(uint8_t type, uint32_t length)
{
    eerie_uart_putc(EERIE_FRAME_MAGIC0);
    eerie_uart_putc(EERIE_FRAME_MAGIC1);
    crc_tx = 0xFFFFFFFFu;
    put_tracked(type);
    put_u32_tracked(length);
}

void eerie_frame_data(const void *data, uint32_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t i;
    for (i = 0; i < n; ++i) {
        put_tracked(p[i]);
    }
}

void eerie_frame_end(void)
{
    uint32_t crc = crc_tx ^ 0xFFFFFFFFu;
    int k;
    for (k = 0; k < 4; ++k) {
        eerie_uart_putc((uint8_t)(crc >> (8 * k)));
    }
}

static uint8_t get_tracked(void)
{
    uint8_t c = eerie_uart_getc();
    crc_rx = crc_update(crc_rx, c);
    return c;
}

uint8_t eerie_frame_recv_header(uint32_t *length)
{
    uint8_t c = 0u, prev;
    uint8_t type;
    uint32_t len = 0u;
    int k;
    do {   /* hunt for the magic: skips noise and the rest of a broken frame */
        prev = c;
        c = eerie_uart_getc();
    } while (!(prev == EERIE_FRAME_MAGIC0 && c == EERIE_FRAME_MAGIC1));
    crc_rx = 0xFFFFFFFFu;
    type = get_tracked();
    for (k = 0; k < 4; ++k) {
        len |= (uint32_t)get_tracked() << (8 * k);
    }
    *length = len;
    return type;
}

void eerie_frame_recv_data(void *data, uint32_t n)
{
    uint8_t *p = (uint8_t *)data;
    uint32_t i;
    for (i = 0; i < n; ++i) {
        p[i] = get_tracked();
    }
}

int eerie_frame_recv_end(void)
{
    uint32_t got = 0u;
    int k;
    for (k = 0; k < 4; ++k) {
        got |= (uint32_t)eerie_uart_getc() << (8 * k);
    }
    return got == (crc_rx ^ 0xFFFFFFFFu) ? 0 : -1;
}

/* ---- The console: text collected into lines, one TEXT frame per line (or per full
 * buffer), so that a key-value line arrives whole. */
#define LINE_BYTES 120u
static char line[LINE_BYTES];
static uint32_t line_len;

static void flush_line(void)
{
    if (line_len != 0u) {
        eerie_frame_begin(EERIE_FRAME_TEXT, line_len);
        eerie_frame_data(line, line_len);
        eerie_frame_end();
        line_len = 0u;
    }
}

void eerie_puts(const char *s)
{
    for (; *s != '\0'; ++s) {
        line[line_len++] = *s;
        if (*s == '\n' || line_len == LINE_BYTES) {
            flush_line();
        }
    }
}

void eerie_exit(int status)
{
    uint32_t st = (uint32_t)status;
    flush_line();
    eerie_frame_begin(EERIE_FRAME_DONE, 4u);
    eerie_frame_data(&st, 4u);   /* little-endian, as the core is */
    eerie_frame_end();
    eerie_uart_flush();
    /* Nothing left to do: stop SysTick and sleep. Under QEMU the host runner ends the
     * emulator when it sees DONE; a physical board stays here until reset. */
    *(volatile uint32_t *)0xE000E010u = 0u;
    for (;;) {
        __asm__ __volatile__("wfi");
    }
}
