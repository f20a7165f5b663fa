// SPDX-License-Identifier: GPL-2.0

#include <linux/kernel.h>
#include <linux/rcupdate.h>

void rust_helper_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rust_helper_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/* For `Revocable::revoke()`, which may sleep and says so to the sleep checks. */
void rust_helper_might_sleep(void)
{
	might_sleep();
}
