/* A QEMU TCG plugin (host code, not firmware): every misaligned load or store ends the run.
 *
 * Real RV32 microcontrollers (SiFive E31/E34, most small cores) trap on a misaligned access,
 * but qemu-system-riscv32 7.2 emulates it silently and has no CPU option to trap. So that a
 * misaligned access in generated code fails under QEMU as it would on such a part (as the
 * ARMv6-M boards fault through CCR.UNALIGN_TRP), eerie-c loads this plugin for its RISC-V
 * boards: each load and store is checked against its size; the first misaligned one prints an
 * "eerie: fault" line with the address and the instruction's pc, and QEMU exits with status 3.
 *
 * Written against QEMU's plugin API version 1 (Debian's QEMU 7.2 loads it); the few
 * declarations it uses are repeated here, so building it needs only a host C compiler
 * (distributions do not ship qemu-plugin.h). eerie_c/toolchain/align_plugin.py builds it. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

typedef uint64_t plugin_id;
typedef uint32_t plugin_meminfo;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef void (*tb_trans_cb)(plugin_id id, struct qemu_plugin_tb *tb);
typedef void (*mem_cb)(unsigned int vcpu, plugin_meminfo info, uint64_t vaddr, void *udata);

/* the API's functions, resolved by QEMU when it loads the plugin */
void qemu_plugin_register_vcpu_tb_trans_cb(plugin_id id, tb_trans_cb cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, mem_cb cb, int flags, int rw,
                                      void *udata);
unsigned int qemu_plugin_mem_size_shift(plugin_meminfo info);
_Bool qemu_plugin_mem_is_store(plugin_meminfo info);

enum { CB_NO_REGS = 0, MEM_RW = 3 };   /* enum qemu_plugin_cb_flags / qemu_plugin_mem_rw */

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static void on_access(unsigned int vcpu, plugin_meminfo info, uint64_t vaddr, void *pc)
{
    const uint64_t size = (uint64_t)1 << qemu_plugin_mem_size_shift(info);
    (void)vcpu;
    if (vaddr & (size - 1)) {
        fprintf(stderr, "eerie: fault: misaligned %u-byte %s at 0x%08llx (pc 0x%08llx)\n",
                (unsigned)size, qemu_plugin_mem_is_store(info) ? "store" : "load",
                (unsigned long long)vaddr, (unsigned long long)(uintptr_t)pc);
        fflush(stderr);
        _exit(3);   /* at once: the faulting access must not complete */
    }
}

static void on_translate(plugin_id id, struct qemu_plugin_tb *tb)
{
    size_t i;
    const size_t n = qemu_plugin_tb_n_insns(tb);
    (void)id;
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_mem_cb(insn, on_access, CB_NO_REGS, MEM_RW,
                                         (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
    }
}

__attribute__((visibility("default")))
int qemu_plugin_install(plugin_id id, const void *info, int argc, char **argv)
{
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    return 0;
}
