/* eerie_semihosting.h: the semihosting calls the harness uses (files and console on the host
 * running QEMU), the same on every architecture. Included once, by the architecture's runtime
 * (eerie_rt.c), after it defines the trap itself:
 *     static uint32_t semihost(uint32_t op, const void *arg);
 * Operation numbers are ARM's semihosting specification, which RISC-V semihosting reuses; on
 * AArch32 and RV32 the parameter block holds 32-bit words and SYS_EXIT takes the reason
 * itself. QEMU serves them with -semihosting-config enable=on,target=native; paths are
 * relative to the directory QEMU runs in. */
#ifndef EERIE_SEMIHOSTING_H
#define EERIE_SEMIHOSTING_H

#define SYS_OPEN 0x01
#define SYS_CLOSE 0x02
#define SYS_WRITE0 0x04
#define SYS_WRITE 0x05
#define SYS_READ 0x06
#define SYS_EXIT 0x18
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define ADP_STOPPED_RUN_TIME_ERROR 0x20023u

static uint32_t semihost(uint32_t op, const void *arg);

int eerie_sh_open(const char *path, int mode)
{
    uint32_t n = 0;
    uint32_t args[3];
    while (path[n] != '\0') {
        ++n;
    }
    args[0] = (uint32_t)(uintptr_t)path;
    args[1] = (uint32_t)mode;
    args[2] = n;
    return (int)semihost(SYS_OPEN, args);
}

int eerie_sh_close(int handle)
{
    uint32_t args[1];
    args[0] = (uint32_t)handle;
    return (int)semihost(SYS_CLOSE, args);
}

uint32_t eerie_sh_read(int handle, void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)handle;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return len - semihost(SYS_READ, args);   /* the call returns the bytes NOT read */
}

uint32_t eerie_sh_write(int handle, const void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)handle;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return len - semihost(SYS_WRITE, args);  /* likewise the bytes NOT written */
}

void eerie_sh_puts(const char *s)
{
    (void)semihost(SYS_WRITE0, s);
}

void eerie_sh_exit(int status)
{
    /* On AArch32 SYS_EXIT takes the reason itself; QEMU exits 0 for "application exit"
     * and 1 for any other reason. */
    (void)semihost(SYS_EXIT, (const void *)(uintptr_t)(status == 0 ? ADP_STOPPED_APPLICATION_EXIT
                                                                    : ADP_STOPPED_RUN_TIME_ERROR));
    for (;;) {
    }
}

#endif /* EERIE_SEMIHOSTING_H */
