/* micro_speech on a Cortex-M board: two eerie-c models in one firmware, written as an
 * application would use them (examples/micro_speech/run.py builds and runs it in QEMU).
 *
 * For each one-second clip of 16 kHz int16 audio read from inputs.bin (semihosting):
 *   audio_preprocessor_invoke on 49 frames of 30 ms, 20 ms apart -> 49 x 40 int8 features,
 *   written straight into the keyword model's input (no copies);
 *   micro_speech_invoke -> 4 int8 scores (silence, unknown, yes, no).
 * Features and scores are appended to outputs.bin; each clip's instruction counts (SysTick
 * under QEMU -icount shift=0) are printed. The front end's noise estimate is reset at the
 * start of every clip, as TFLM's micro_speech test does by making a new interpreter. */
#include <stdint.h>

#include "eerie_rt.h"
#include "audio_preprocessor.h"
#include "micro_speech.h"

#define SAMPLES 16000   /* one second at 16 kHz */
#define FRAME 480       /* 30 ms */
#define STRIDE 320      /* 20 ms */
#define FRAMES 49       /* (SAMPLES - FRAME) / STRIDE + 1 */
#define FEATURES 40

/* The models' shapes are what this program assumes (a compile error otherwise). */
typedef char frame_matches[(AUDIO_PREPROCESSOR_INPUT0_ELEMENTS == FRAME) ? 1 : -1];
typedef char features_match[(AUDIO_PREPROCESSOR_OUTPUT0_ELEMENTS == FEATURES) ? 1 : -1];
typedef char keyword_input_matches[(MICRO_SPEECH_INPUT0_ELEMENTS == FRAMES * FEATURES) ? 1 : -1];

static int16_t audio[SAMPLES];
static int8_t features[FRAMES * FEATURES];
static int8_t scores[MICRO_SPEECH_OUTPUT0_ELEMENTS];

static void put_line(uint32_t clip, uint64_t frontend, uint64_t keyword)
{
    eerie_sh_puts("eerie: clip ");
    eerie_put_u64(clip);
    eerie_sh_puts(" frontend_instructions ");
    eerie_put_u64(frontend);
    eerie_sh_puts(" keyword_instructions ");
    eerie_put_u64(keyword);
    eerie_sh_puts("\n");
    /* the total as the line eerie-c's QEMU runner counts inferences by */
    eerie_sh_puts("eerie: inference ");
    eerie_put_u64(clip);
    eerie_sh_puts(" instructions ");
    eerie_put_u64(frontend + keyword);
    eerie_sh_puts("\n");
}

int main(void)
{
    uint32_t clip = 0u;
    int in = eerie_sh_open("inputs.bin", EERIE_SH_MODE_RB);
    int out = eerie_sh_open("outputs.bin", EERIE_SH_MODE_WB);
    if (in < 0 || out < 0) {
        eerie_sh_puts("eerie: error: cannot open inputs.bin or outputs.bin\n");
        return 1;
    }
    while (eerie_sh_read(in, audio, sizeof audio) == sizeof audio) {
        uint64_t t0, t1, t2;
        int f, rc = 0;
        t0 = eerie_counter_ticks();
        audio_preprocessor_reset_state();
        for (f = 0; f < FRAMES; ++f) {
            rc |= audio_preprocessor_invoke(audio + f * STRIDE, features + f * FEATURES);
        }
        t1 = eerie_counter_ticks();
        rc |= micro_speech_invoke(features, scores);
        t2 = eerie_counter_ticks();
        if (rc != 0) {
            eerie_sh_puts("eerie: error: a model returned an error\n");
            return 1;
        }
        if (eerie_sh_write(out, features, sizeof features) != sizeof features
                || eerie_sh_write(out, scores, sizeof scores) != sizeof scores) {
            eerie_sh_puts("eerie: error: cannot write outputs.bin\n");
            return 1;
        }
        put_line(clip, eerie_ticks_to_instructions(t1 - t0), eerie_ticks_to_instructions(t2 - t1));
        ++clip;
    }
    (void)eerie_sh_close(in);
    (void)eerie_sh_close(out);
    eerie_put_kv("inferences", clip);
    eerie_put_kv("stack_high_water_bytes", eerie_stack_high_water());
    eerie_put_kv("stack_reserve_bytes", eerie_stack_size());
    return clip > 0u ? 0 : 1;
}
