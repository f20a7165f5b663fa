// SPDX-License-Identifier: GPL-2.0

#include <linux/device.h>

int rust_helper_devm_add_action_or_reset(struct device *dev,
					 void (*action)(void *), void *data)
{
	return devm_add_action_or_reset(dev, action, data);
}

#include <linux/pm_runtime.h>

int rust_helper_pm_runtime_resume_and_get(struct device *dev)
{
	return pm_runtime_resume_and_get(dev);
}

int rust_helper_pm_runtime_get_if_active(struct device *dev)
{
	return pm_runtime_get_if_active(dev);
}

void rust_helper_pm_runtime_mark_last_busy(struct device *dev)
{
	pm_runtime_mark_last_busy(dev);
}

int rust_helper_pm_runtime_put_autosuspend(struct device *dev)
{
	return pm_runtime_put_autosuspend(dev);
}

void rust_helper_pm_runtime_get_noresume(struct device *dev)
{
	pm_runtime_get_noresume(dev);
}

void rust_helper_pm_runtime_put_noidle(struct device *dev)
{
	pm_runtime_put_noidle(dev);
}

void rust_helper_pm_runtime_use_autosuspend(struct device *dev)
{
	pm_runtime_use_autosuspend(dev);
}

void rust_helper_pm_runtime_dont_use_autosuspend(struct device *dev)
{
	pm_runtime_dont_use_autosuspend(dev);
}

void rust_helper_pm_runtime_set_autosuspend_delay(struct device *dev, int delay)
{
	pm_runtime_set_autosuspend_delay(dev, delay);
}

void rust_helper_pm_runtime_allow(struct device *dev)
{
	pm_runtime_allow(dev);
}

void rust_helper_pm_runtime_forbid(struct device *dev)
{
	pm_runtime_forbid(dev);
}
