package guest

const sysFinitModule = 273 // finit_module on arm64 (asm-generic numbering)
