// SPDX-License-Identifier: GPL-2.0

#include <linux/cpumask.h>
#include <linux/smp.h>

/* Checks `cpu` against nr_cpu_ids first, so Rust may ask about any number. */
bool rust_helper_cpu_online(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_online(cpu);
}

unsigned int rust_helper_raw_smp_processor_id(void)
{
	return raw_smp_processor_id();
}

/* Both are static inline functions in <linux/cpumask.h>. */
unsigned int rust_helper_cpumask_size(void)
{
	return cpumask_size();
}

void rust_helper_cpumask_copy(struct cpumask *dst, const struct cpumask *src)
{
	cpumask_copy(dst, src);
}
