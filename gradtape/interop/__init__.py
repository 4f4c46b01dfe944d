"""gradtape beside other libraries: einops on gradtape tensors (:mod:`gradtape.interop.einops`)."""
