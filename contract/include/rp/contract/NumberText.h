//===- NumberText.h - the one strict parser of numbers in flags -*- C++ -*-===//
//
// Every numeric option of every rp tool (rp-run's flags through
// NumberFlags, the compiler's through rp/Support/StrictNumbers.h) and the
// launcher's environment variables are read by these functions, so that
// one rule holds everywhere: the whole text is one plain decimal number.
// An empty value, trailing text ("1e-3x"), leading spaces, a '+', hex
// ("0x10"), leading zeros on a whole number ("010", octal to LLVM), "nan"
// and "inf" are refused: strtod and CLI11 take some of
// them (an empty --lr was 0, training nothing), and a number the user did
// not mean is a silent wrong answer. Header-only: the compiler and the
// runtime share it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_NUMBERTEXT_H
#define RP_CONTRACT_NUMBERTEXT_H

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace rp::numbers {

/// Decimal digits only ("0" to "18446744073709551615"), without leading
/// zeros (LLVM's parsers read "010" as octal 8); none otherwise.
inline std::optional<uint64_t> parseUnsignedText(std::string_view text) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text[0] == '0'))
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    uint64_t digit = uint64_t(c - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

/// An optional '-' and decimal digits, within int64_t.
inline std::optional<int64_t> parseSignedText(std::string_view text) {
  bool negative = !text.empty() && text.front() == '-';
  std::optional<uint64_t> magnitude =
      parseUnsignedText(negative ? text.substr(1) : text);
  if (!magnitude)
    return std::nullopt;
  if (negative)
    return *magnitude <= uint64_t(INT64_MAX) + 1
               ? std::optional<int64_t>(int64_t(0 - *magnitude))
               : std::nullopt;
  return *magnitude <= uint64_t(INT64_MAX)
             ? std::optional<int64_t>(int64_t(*magnitude))
             : std::nullopt;
}

/// A finite decimal number: [-]digits[.digits][e[+-]digits] (".5" and
/// "5." too); none for anything else, NaN, infinity and overflow.
inline std::optional<double> parseRealText(std::string_view text) {
  size_t i = 0, n = text.size();
  if (i < n && text[i] == '-')
    ++i;
  size_t digits = 0;
  while (i < n && text[i] >= '0' && text[i] <= '9')
    ++i, ++digits;
  if (i < n && text[i] == '.')
    for (++i; i < n && text[i] >= '0' && text[i] <= '9';)
      ++i, ++digits;
  if (digits == 0)
    return std::nullopt;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '-' || text[i] == '+'))
      ++i;
    size_t exponent = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9')
      ++i, ++exponent;
    if (exponent == 0)
      return std::nullopt;
  }
  if (i != n)
    return std::nullopt;
  // The text is now known to be what strtod reads whole, in any locale
  // that writes '.' (rp's tools never set another).
  std::string copy(text);
  errno = 0;
  double value = std::strtod(copy.c_str(), nullptr);
  if (!std::isfinite(value))
    return std::nullopt;
  return value;
}

/// How a refused value is shown: as given, or quoted when it is empty or
/// holds spaces (else the message would look as if no value was given).
inline std::string shownText(std::string_view text) {
  if (!text.empty() && text.find_first_of(" \t\n") == std::string_view::npos)
    return std::string(text);
  return "'" + std::string(text) + "'";
}

} // namespace rp::numbers

#endif // RP_CONTRACT_NUMBERTEXT_H
