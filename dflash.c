/* dflash.c - DFlash speculative decoding on a toy Qwen3 model (work in progress). */
#include "dflash.h"

#include <stdarg.h>
#include <stdio.h>

char dflash_errmsg[1024];

void dflash_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dflash_errmsg, sizeof dflash_errmsg, fmt, ap);
    va_end(ap);
}

#ifndef DFLASH_NO_MAIN
int main(void) { return 0; }
#endif
