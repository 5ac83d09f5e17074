/* eerie_uart.h: the firmware's inputs, outputs and console as frames on a UART, for boards
 * without semihosting (build with -DEERIE_CONSOLE_UART). The same image runs under QEMU
 * (the UART is QEMU's -serial chardev) and on a physical board with a USB-UART.
 *
 * A frame, in both directions:
 *
 *     0xEE 0xC0 | type (1 byte) | length (uint32 LE) | payload (length bytes) | CRC-32 (LE)
 *
 * The CRC is zlib's CRC-32 over type, length and payload. The two magic bytes let a
 * receiver skip noise (a terminal's bytes, a reset mid-frame) up to the next frame.
 *
 * The exchange is lock-step, so that a board with no receive FIFO never loses a byte while
 * it computes: the board sends READY (the record it expects next), the host answers with
 * one INPUT record or END; the board runs the inference and sends OUTPUT, then TEXT lines
 * (the same "eerie: ..." measurement lines the semihosting boards print), then READY for
 * the next record. After END it sends its summary lines and DONE (its exit status). */
#ifndef EERIE_UART_H
#define EERIE_UART_H

#include <stdint.h>

#define EERIE_FRAME_MAGIC0 0xEEu
#define EERIE_FRAME_MAGIC1 0xC0u

/* board -> host */
#define EERIE_FRAME_READY 'R'   /* uint32 next record index, record bytes, output bytes */
#define EERIE_FRAME_OUTPUT 'O'  /* one record of outputs, in model order */
#define EERIE_FRAME_TEXT 'T'    /* console text (whole lines when they fit the line buffer) */
#define EERIE_FRAME_DONE 'D'    /* uint32 exit status: the run is over */
/* host -> board */
#define EERIE_FRAME_INPUT 'I'   /* one record of inputs, in model order */
#define EERIE_FRAME_END 'X'     /* no more records */
#define EERIE_FRAME_QUERY 'Q'   /* "send READY again" (a host that missed the board's boot) */

/* The part's driver (eerie_stm32f4.c): set up the UART; blocking byte I/O. */
void eerie_uart_init(void);
void eerie_uart_putc(uint8_t c);
uint8_t eerie_uart_getc(void);
void eerie_uart_flush(void);        /* until the last byte has left the shift register */

/* Sending: a header, payload pieces adding up to its length, the CRC. */
void eerie_frame_begin(uint8_t type, uint32_t length);
void eerie_frame_data(const void *data, uint32_t n);
void eerie_frame_end(void);

/* Receiving: waits for a frame's header (skipping anything before the magic) and returns
 * its type and length; the payload is then read in pieces, and eerie_frame_recv_end()
 * returns 0 when the CRC matches. */
uint8_t eerie_frame_recv_header(uint32_t *length);
void eerie_frame_recv_data(void *data, uint32_t n);
int eerie_frame_recv_end(void);

#endif /* EERIE_UART_H */
