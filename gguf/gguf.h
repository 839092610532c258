/* gguf/gguf.h - `dflash gguf` (gguf/gguf.c): a weight set in llama.cpp's GGUF format.
 *
 *   dflash gguf --weights DIR OUT_DIR
 *   dflash gguf --target DIR --draft DIR OUT_DIR
 *
 * writes OUT_DIR/target.gguf (architecture qwen3) and OUT_DIR/draft.gguf
 * (architecture dflash) as llama.cpp's convert_hf_to_gguf.py lays them out
 * (classes Qwen3Model and DFlashModel; the commit followed is in NOTES.md,
 * "GGUF"). Returns the exit status: 0, or 2 after one line on stderr.
 */
#ifndef DFLASH_GGUF_H
#define DFLASH_GGUF_H

int gguf_main(int argc, char **argv);

#endif /* DFLASH_GGUF_H */
