// SPDX-License-Identifier: GPL-2.0

#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/platform_device.h>

void *rust_helper_platform_get_drvdata(const struct platform_device *pdev)
{
	return platform_get_drvdata(pdev);
}

void rust_helper_platform_set_drvdata(struct platform_device *pdev, void *data)
{
	platform_set_drvdata(pdev, data);
}

resource_size_t rust_helper_resource_size(const struct resource *res)
{
	return resource_size(res);
}

/* request_mem_region() and release_mem_region() are macros. */
struct resource *rust_helper_request_mem_region(resource_size_t start,
						resource_size_t n,
						const char *name)
{
	return request_mem_region(start, n, name);
}

void rust_helper_release_mem_region(resource_size_t start, resource_size_t n)
{
	release_mem_region(start, n);
}

/* ioremap() is a macro on arm64, iounmap() may be an inline function. */
void __iomem *rust_helper_ioremap(phys_addr_t offset, size_t size)
{
	return ioremap(offset, size);
}

void rust_helper_iounmap(volatile void __iomem *addr)
{
	iounmap(addr);
}
