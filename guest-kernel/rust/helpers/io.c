// SPDX-License-Identifier: GPL-2.0

#include <linux/io.h>

/*
 * Rust cannot call the MMIO accessors, which are static inline functions or
 * macros; each gets an out-of-line read and write helper here.
 */
#define RUST_IO_HELPERS(type, read, write)				\
	type rust_helper_##read(const volatile void __iomem *addr)	\
	{								\
		return read(addr);					\
	}								\
	void rust_helper_##write(type value, volatile void __iomem *addr) \
	{								\
		write(value, addr);					\
	}

RUST_IO_HELPERS(u8, readb, writeb)
RUST_IO_HELPERS(u8, readb_relaxed, writeb_relaxed)
RUST_IO_HELPERS(u16, readw, writew)
RUST_IO_HELPERS(u16, readw_relaxed, writew_relaxed)
RUST_IO_HELPERS(u32, readl, writel)
RUST_IO_HELPERS(u32, readl_relaxed, writel_relaxed)
#ifdef CONFIG_64BIT
RUST_IO_HELPERS(u64, readq, writeq)
RUST_IO_HELPERS(u64, readq_relaxed, writeq_relaxed)
#endif
