#include "kernel_image.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace aclsim {
namespace {

// A name from a string table section, or "" where the offset falls outside it.
std::string name_at(const std::string& file, const Elf64_Shdr& strtab, uint64_t offset) {
  if (offset >= strtab.sh_size) return "";
  const char* begin = file.data() + strtab.sh_offset + offset;
  return std::string(begin, strnlen(begin, strtab.sh_size - offset));
}

// The meta record's kernel type: its type-length-value entries, of which type 1 (F_TYPE_KTYPE)
// carries the kernel type in 4 bytes; the last such entry counts, as the runtime reads them.
uint32_t record_kernel_type(const char* data, uint64_t size) {
  uint32_t type = kTypeNone;
  while (size > 4) {
    uint16_t tag, length;
    std::memcpy(&tag, data, 2);
    std::memcpy(&length, data + 2, 2);
    if (4u + length > size) break;
    if (tag == 1 && length >= 4) std::memcpy(&type, data + 4, 4);
    data += 4 + length;
    size -= 4 + length;
  }
  return type;
}

}  // namespace

std::string read_kernel_image(const std::string& path, const std::string& skip, KernelImage* out) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < sizeof(Elf64_Ehdr) || std::memcmp(file.data(), ELFMAG, SELFMAG) != 0 || file[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  Elf64_Ehdr header;
  std::memcpy(&header, file.data(), sizeof header);
  out->relocatable = header.e_type == ET_REL;
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shoff > file.size() ||
      header.e_shnum > (file.size() - header.e_shoff) / sizeof(Elf64_Shdr) || header.e_shstrndx >= header.e_shnum)
    return "its section headers lie outside the file";
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), file.data() + header.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  for (const Elf64_Shdr& s : sections)
    if (s.sh_type != SHT_NOBITS && (s.sh_offset > file.size() || s.sh_size > file.size() - s.sh_offset))
      return "a section lies outside the file";

  static const std::string kMetaPrefix = ".ascend.meta.";
  std::map<std::string, uint32_t> records;
  const Elf64_Shdr* symtab = nullptr;
  for (const Elf64_Shdr& s : sections) {
    const std::string name = name_at(file, sections[header.e_shstrndx], s.sh_name);
    if (name.compare(0, kMetaPrefix.size(), kMetaPrefix) == 0 && name.size() > kMetaPrefix.size())
      records[name.substr(kMetaPrefix.size())] = record_kernel_type(file.data() + s.sh_offset, s.sh_size);
    if (s.sh_type == SHT_SYMTAB) symtab = &s;
  }
  if (!symtab) return "it has no symbol table";
  if (symtab->sh_link >= sections.size() || symtab->sh_entsize != sizeof(Elf64_Sym)) return "its symbol table is malformed";
  const Elf64_Shdr& strtab = sections[symtab->sh_link];
  for (uint64_t i = 0; i < symtab->sh_size / sizeof(Elf64_Sym); ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, file.data() + symtab->sh_offset + i * sizeof sym, sizeof sym);
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || ELF64_ST_BIND(sym.st_info) != STB_GLOBAL ||
        ELF64_ST_VISIBILITY(sym.st_other) == STV_HIDDEN || sym.st_shndx == SHN_UNDEF || sym.st_name == 0)
      continue;
    const std::string name = name_at(file, strtab, sym.st_name);
    if (!name.empty() && name != skip) out->kernels.push_back(name);
  }
  out->records = std::move(records);
  return "";
}

}  // namespace aclsim
