//! `vemu images`: the store of image nodes' images on this machine (docs/images.md).

use anyhow::Result;

use crate::cli::ImagesCmd;
use crate::lab::{need_root, user};

pub(crate) fn images(cmd: ImagesCmd) -> Result<()> {
    need_root()?;
    match cmd {
        ImagesCmd::Ls => {
            let stored = vemu_control::labs::stored_images()?;
            let used = vemu_control::labs::images_in_use();
            println!("{:<19} {:>10}  {:<6} REFERENCES", "DIGEST", "SIZE", "IN USE");
            for (image, bytes) in stored {
                let refs: Vec<&str> = image
                    .references
                    .iter()
                    .map(|r| vemu_control::labs::display_reference(r))
                    .collect();
                let short = image.digest.trim_start_matches("sha256:");
                println!(
                    "sha256:{:<12} {:>7.1} MB  {:<6} {}",
                    &short[..short.len().min(12)],
                    bytes as f64 / 1e6,
                    if used.contains(&image.digest) { "yes" } else { "no" },
                    refs.join(", ")
                );
            }
        }
        ImagesCmd::Rm { image } => {
            let digest =
                vemu_control::labs::remove_image(&image).map_err(|e| user(format!("{e:#}")))?;
            println!("removed {digest}");
        }
        ImagesCmd::Prune => {
            for digest in vemu_control::labs::prune_images()? {
                println!("removed {digest}");
            }
        }
    }
    Ok(())
}
