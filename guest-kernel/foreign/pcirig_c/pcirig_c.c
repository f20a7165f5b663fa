// SPDX-License-Identifier: GPL-2.0
/*
 * pcirig_c: a C driver for pci-rig's device (qemu-device/REGISTERS.md), written
 * the way many C PCI drivers are (unmanaged resources, torn down by hand in
 * remove), to try `cargo xtask test --module` on a module pci-rig's judge knows
 * nothing of. It checks the device's identity, resets it, takes one MSI (or
 * INTx), runs one DMA the device sums (OP_DMA_CRC32) and compares the sum with
 * its own, then reads COUNTER every 50 ms from a heartbeat until it is unbound.
 * The mutate catalog plants the bugs such a driver is known for.
 */

#include <linux/completion.h>
#include <linux/crc32.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

/* BAR0 registers and values, from REGISTERS.md. */
#define REG_MAGIC 0x000
#define REG_VERSION 0x004
#define REG_COUNTER 0x00c
#define REG_CMD 0x010
#define REG_STATUS 0x014
#define REG_OP_LENGTH 0x01c
#define REG_RESULT 0x024
#define REG_INT_STATUS 0x030
#define REG_INT_ENABLE 0x034
#define REG_INT_ACK 0x03c
#define REG_RESET 0x050
#define REG_DMA_ADDR_LO 0x060
#define REG_DMA_ADDR_HI 0x064

#define MAGIC_VALUE 0x70726967
#define VERSION_MAJOR 1
#define RESET_KEY 1
#define OP_DMA_CRC32 6
#define STATUS_ERROR (1 << 2)
#define INT_DONE (1 << 0)
#define INT_ERROR (1 << 1)

#define DMA_BYTES 4096

struct pcirig_c {
	struct pci_dev *pdev;
	void __iomem *regs;
	struct completion done;
	struct delayed_work heartbeat;
};

static irqreturn_t pcirig_c_irq(int irq, void *data)
{
	struct pcirig_c *p = data;
	u32 status = readl(p->regs + REG_INT_STATUS);

	if (!status)
		return IRQ_NONE;
	writel(status, p->regs + REG_INT_ACK);
	if (status & (INT_DONE | INT_ERROR))
		complete(&p->done);
	return IRQ_HANDLED;
}

static void pcirig_c_heartbeat(struct work_struct *work)
{
	struct pcirig_c *p =
		container_of(to_delayed_work(work), struct pcirig_c, heartbeat);

	readl(p->regs + REG_COUNTER);
	schedule_delayed_work(&p->heartbeat, msecs_to_jiffies(50));
}

/* The device sums a buffer of ours by DMA; its sum must be ours. */
static int pcirig_c_dma_test(struct pcirig_c *p)
{
	struct device *dev = &p->pdev->dev;
	dma_addr_t bus;
	u32 want, got;
	int ret = 0;
	u8 *buf;
	int i;

	buf = dma_alloc_coherent(dev, DMA_BYTES, &bus, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < DMA_BYTES; i++)
		buf[i] = i * 7 + 3;
	want = ~crc32_le(~0, buf, DMA_BYTES);
	reinit_completion(&p->done);
	writel(lower_32_bits(bus), p->regs + REG_DMA_ADDR_LO);
	writel(upper_32_bits(bus), p->regs + REG_DMA_ADDR_HI);
	writel(DMA_BYTES, p->regs + REG_OP_LENGTH);
	writel(OP_DMA_CRC32, p->regs + REG_CMD);
	if (!wait_for_completion_timeout(&p->done, msecs_to_jiffies(5000))) {
		/* The device may still read the buffer: stop it before freeing. */
		writel(RESET_KEY, p->regs + REG_RESET);
		ret = -ETIMEDOUT;
	} else if (readl(p->regs + REG_STATUS) & STATUS_ERROR) {
		ret = -EIO;
	} else {
		got = readl(p->regs + REG_RESULT);
		if (got != want) {
			dev_err(dev, "DMA CRC-32 %08x, expected %08x\n", got, want);
			ret = -EIO;
		}
	}
	dma_free_coherent(dev, DMA_BYTES, buf, bus);
	return ret;
}

static int pcirig_c_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pcirig_c *p;
	u32 magic, version;
	int ret;

	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->pdev = pdev;
	init_completion(&p->done);
	INIT_DELAYED_WORK(&p->heartbeat, pcirig_c_heartbeat);

	ret = pci_enable_device(pdev);
	if (ret)
		goto err_free;
	ret = pci_request_regions(pdev, "pcirig_c");
	if (ret)
		goto err_disable;
	p->regs = pci_iomap(pdev, 0, 0);
	if (!p->regs) {
		ret = -ENOMEM;
		goto err_release;
	}
	magic = readl(p->regs + REG_MAGIC);
	version = readl(p->regs + REG_VERSION);
	if (magic != MAGIC_VALUE || version >> 16 != VERSION_MAJOR) {
		dev_err(&pdev->dev, "not pci-rig's device: MAGIC %08x VERSION %08x\n",
			magic, version);
		ret = -ENODEV;
		goto err_unmap;
	}
	writel(RESET_KEY, p->regs + REG_RESET);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (ret)
		goto err_unmap;
	pci_set_master(pdev);
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI | PCI_IRQ_INTX);
	if (ret < 0)
		goto err_unmap;
	ret = request_irq(pci_irq_vector(pdev, 0), pcirig_c_irq, IRQF_SHARED,
			  "pcirig_c", p);
	if (ret)
		goto err_vectors;
	writel(INT_DONE | INT_ERROR, p->regs + REG_INT_ENABLE);
	ret = pcirig_c_dma_test(p);
	if (ret)
		goto err_irq;
	pci_set_drvdata(pdev, p);
	schedule_delayed_work(&p->heartbeat, msecs_to_jiffies(50));
	dev_info(&pdev->dev, "pcirig_c: bound, DMA checked\n");
	return 0;

err_irq:
	writel(0, p->regs + REG_INT_ENABLE);
	writel(RESET_KEY, p->regs + REG_RESET);
	free_irq(pci_irq_vector(pdev, 0), p);
err_vectors:
	pci_free_irq_vectors(pdev);
err_unmap:
	pci_iounmap(pdev, p->regs);
err_release:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(p);
	return ret;
}

static void pcirig_c_remove(struct pci_dev *pdev)
{
	struct pcirig_c *p = pci_get_drvdata(pdev);

	cancel_delayed_work_sync(&p->heartbeat);
	writel(0, p->regs + REG_INT_ENABLE);
	writel(RESET_KEY, p->regs + REG_RESET);
	free_irq(pci_irq_vector(pdev, 0), p);
	pci_free_irq_vectors(pdev);
	pci_iounmap(pdev, p->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	kfree(p);
}

static const struct pci_device_id pcirig_c_ids[] = {
	{ PCI_DEVICE(0x7072, 0x0001) },
	{}
};
MODULE_DEVICE_TABLE(pci, pcirig_c_ids);

static struct pci_driver pcirig_c_driver = {
	.name = "pcirig_c",
	.id_table = pcirig_c_ids,
	.probe = pcirig_c_probe,
	.remove = pcirig_c_remove,
};
module_pci_driver(pcirig_c_driver);

MODULE_DESCRIPTION("A C driver for pci-rig's device, to try --module on");
MODULE_LICENSE("GPL");
