// SPDX-License-Identifier: GPL-2.0

#include <linux/dma-mapping.h>

int rust_helper_dma_set_mask_and_coherent(struct device *dev, u64 mask)
{
	return dma_set_mask_and_coherent(dev, mask);
}

int rust_helper_dma_mapping_error(struct device *dev, dma_addr_t dma_addr)
{
	return dma_mapping_error(dev, dma_addr);
}

dma_addr_t rust_helper_dma_map_single_attrs(struct device *dev, void *ptr,
					    size_t size,
					    enum dma_data_direction dir,
					    unsigned long attrs)
{
	return dma_map_single_attrs(dev, ptr, size, dir, attrs);
}

void rust_helper_dma_sync_single_for_cpu(struct device *dev, dma_addr_t addr,
					 size_t size,
					 enum dma_data_direction dir)
{
	dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rust_helper_dma_sync_single_for_device(struct device *dev,
					    dma_addr_t addr, size_t size,
					    enum dma_data_direction dir)
{
	dma_sync_single_for_device(dev, addr, size, dir);
}
