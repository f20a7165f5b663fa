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
