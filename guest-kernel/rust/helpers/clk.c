// SPDX-License-Identifier: GPL-2.0

#include <linux/clk.h>
#include <linux/cpufreq.h>

#ifdef CONFIG_COMMON_CLK
/* Both are static inline functions in <linux/clk.h>. */
int rust_helper_clk_prepare_enable(struct clk *clk)
{
	return clk_prepare_enable(clk);
}

void rust_helper_clk_disable_unprepare(struct clk *clk)
{
	clk_disable_unprepare(clk);
}
#endif

#ifdef CONFIG_CPU_FREQ
/*
 * `cpus` and `related_cpus` are `cpumask_var_t`: an array or a pointer,
 * depending on CONFIG_CPUMASK_OFFSTACK. Rust takes them as pointers.
 */
struct cpumask *rust_helper_cpufreq_policy_cpus(struct cpufreq_policy *policy)
{
	return policy->cpus;
}

struct cpumask *rust_helper_cpufreq_policy_related_cpus(struct cpufreq_policy *policy)
{
	return policy->related_cpus;
}

unsigned int rust_helper_cpumask_weight(const struct cpumask *mask)
{
	return cpumask_weight(mask);
}
#endif
